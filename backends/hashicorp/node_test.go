package hashicorp

import (
	"context"
	"errors"
	"testing"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/backends/internal/badgerlog"
	"github.com/ticketd/ticketd/core"
)

// single returns the Config of a one-voter cluster in dir.
func single(t *testing.T, dir string, events chan<- core.LeaderEvent) backends.Config {
	addr := backendtest.FreeAddr(t)
	return backends.Config{
		ID:                "solo",
		RaftAddr:          addr,
		DataDir:           dir,
		Bootstrap:         []core.Member{{ID: "solo", RaftAddr: addr}},
		StateMachine:      core.NewStateMachine(),
		HeartbeatInterval: backendtest.HeartbeatInterval,
		ElectionTimeout:   backendtest.ElectionTimeout,
		OnLeaderChange: func(ev core.LeaderEvent) {
			if events != nil {
				events <- ev
			}
		},
	}
}

// waitReady waits for the IsLeader=true event.
func waitReady(ctx context.Context, t *testing.T, events <-chan core.LeaderEvent) core.LeaderEvent {
	t.Helper()
	for {
		select {
		case ev := <-events:
			if ev.IsLeader {
				return ev
			}
		case <-ctx.Done():
			t.Fatal("node never reported itself ready as leader")
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	cfg := single(t, t.TempDir(), nil)
	cfg.StateMachine = nil
	if _, err := New(cfg); !errors.Is(err, backends.ErrInvalidConfig) {
		t.Fatalf("New without a state machine = %v, want ErrInvalidConfig", err)
	}
}

func TestNewRefusesAnotherBackendsDataDir(t *testing.T) {
	dir := t.TempDir()
	db, err := badgerlog.Open(dir, "etcd", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := New(single(t, dir, nil)); !errors.Is(err, badgerlog.ErrWrongBackend) {
		t.Fatalf("New on an etcd data dir = %v, want ErrWrongBackend", err)
	}
}

func TestSingleNodeLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), backendtest.WaitTimeout)
	defer cancel()
	events := make(chan core.LeaderEvent, 16)
	n, err := New(single(t, t.TempDir(), events))
	if err != nil {
		t.Fatal(err)
	}
	ev := waitReady(ctx, t, events)
	if ev.Leader.ID != "solo" || ev.Term == 0 {
		t.Fatalf("ready event %+v", ev)
	}
	res, err := n.Propose(ctx, core.Grant("a", 1000, "me"))
	if err != nil || res.Outcome != core.OutcomeGranted || res.Token != 1 {
		t.Fatalf("grant: %+v, %v", res, err)
	}
	if _, err := n.Propose(ctx, core.Command{Op: core.Op(200)}); !errors.Is(err, core.ErrInvalidArgument) {
		t.Fatalf("unencodable command: %v, want ErrInvalidArgument", err)
	}
	if err := n.TransferLeadership(ctx, "solo"); err != nil {
		t.Fatalf("transfer to itself: %v", err)
	}
	if err := n.TransferLeadership(ctx, "nobody"); !errors.Is(err, core.ErrInvalidArgument) {
		t.Fatalf("transfer to a non-member: %v, want ErrInvalidArgument", err)
	}
	st := n.Status()
	if st.Backend != BackendName || st.ID != "solo" || st.Leader.ID != "solo" || len(st.Members) != 1 || !st.Members[0].Voter {
		t.Fatalf("status %+v", st)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := n.Propose(ctx, core.Grant("b", 1000, "me")); !errors.Is(err, core.ErrStopped) {
		t.Fatalf("propose after close: %v, want ErrStopped", err)
	}
	if err := n.ReadIndex(ctx); !errors.Is(err, core.ErrStopped) {
		t.Fatalf("ReadIndex after close: %v, want ErrStopped", err)
	}
}

// TestUndecodableEntryStopsTheNode commits an entry core cannot decode: the
// node must stop applying and fail every call with an error that says both
// "stopped" and why, rather than skip the entry and fork.
func TestUndecodableEntryStopsTheNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), backendtest.WaitTimeout)
	defer cancel()
	events := make(chan core.LeaderEvent, 16)
	cfg := single(t, t.TempDir(), events)
	fatal := make(chan error, 2)
	cfg.OnFatal = func(err error) { fatal <- err }
	sm := cfg.StateMachine
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	waitReady(ctx, t, events)
	before := sm.AppliedIndex()

	_, err = n.apply(ctx, []byte{0xEE, 1, 2, 3})
	if !errors.Is(err, core.ErrStopped) || !errors.Is(err, core.ErrDecode) {
		t.Fatalf("apply of garbage: %v, want ErrStopped and ErrDecode", err)
	}
	select {
	case <-n.stopCh:
	case <-ctx.Done():
		t.Fatal("node did not stop after a fatal apply error")
	}
	_, err = n.Propose(ctx, core.Grant("x", 1000, "me"))
	if !errors.Is(err, core.ErrStopped) || !errors.Is(err, core.ErrDecode) {
		t.Fatalf("propose after the fatal error: %v, want ErrStopped and ErrDecode", err)
	}
	if got := sm.AppliedIndex(); got != before {
		t.Fatalf("applied index moved from %d to %d past the bad entry", before, got)
	}
	if err := <-fatal; !errors.Is(err, core.ErrDecode) {
		t.Fatalf("OnFatal got %v, want ErrDecode", err)
	}
	_ = n.Close()
	if len(fatal) != 0 {
		t.Fatalf("OnFatal called again: %v", <-fatal)
	}
}
