package hashicorp

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestHCLogAdapter(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	l := newHCLog(zap.New(core, zap.Development())).Named("raft").With("node", "n1")
	l.Info("entering leader state", "term", 3, "odd")
	l.Trace("heartbeat")
	l.Log(hclog.Off, "never")
	got := logs.All()
	if len(got) != 2 {
		t.Fatalf("%d entries logged, want 2: %+v", len(got), got)
	}
	ctx := got[0].ContextMap()
	if got[0].LoggerName != "raft" || got[0].Level != zap.InfoLevel || ctx["node"] != "n1" || ctx["term"] != int64(3) || ctx["EXTRA_VALUE_AT_END"] != "odd" {
		t.Fatalf("entry %+v with fields %v", got[0], ctx)
	}
	if got[1].Level != zap.DebugLevel {
		t.Fatalf("trace logged at %v, want debug", got[1].Level)
	}
	if !l.IsDebug() || l.GetLevel() != hclog.Debug || l.Name() != "raft" {
		t.Fatalf("level/name: debug=%v level=%v name=%q", l.IsDebug(), l.GetLevel(), l.Name())
	}
}

// TestHCLogFormat: hclog.Fmt values (hashicorp logs its configuration with
// them) are rendered, not printed as a format string and a slice.
func TestHCLogFormat(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	l := newHCLog(zap.New(core))
	l.Info("initial configuration", "servers", hclog.Fmt("%+v", []string{"n1", "n2"}))
	got := logs.All()
	if len(got) != 1 {
		t.Fatalf("%d entries", len(got))
	}
	if s := got[0].ContextMap()["servers"]; s != "[n1 n2]" {
		t.Fatalf("servers field %#v, want \"[n1 n2]\"", s)
	}
}
