//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// TestMain lets the test binary serve as the worker processes, as the
// example's own binary does: run starts os.Args[0] "worker" ....
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(workerMain(context.Background(), os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

// logWriter sends the run's log lines to t.Log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestFencedCounter(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a ticketd cluster")
	}
	cl := ticketdtest.Start(t, ticketdtest.Options{Nodes: 3, Args: []string{"--raft-election-timeout-ms=500", "--raft-heartbeat-ms=50"}})
	var eps []string
	for i := range cl.Len() {
		eps = append(eps, cl.Node(i).APIAddr)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := config{endpoints: eps, key: "fenced-counter/test", workers: 3, rounds: 4, ttl: time.Second, stall: true, self: self}
	sum, err := run(ctx, cfg, logWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	// run has checked the history; restate the outcome the example is about.
	if len(sum.rejected) != 1 || sum.rejected[0].Worker != 0 {
		t.Fatalf("refused writes %+v, want exactly the stalled worker's", sum.rejected)
	}
	if want := int64(cfg.workers*cfg.rounds - 1); sum.final != want {
		t.Fatalf("counter %d, want %d (every round but the refused one)", sum.final, want)
	}
	fmt.Fprintf(logWriter{t}, "counter %d, refused write: %+v", sum.final, sum.rejected[0])
}

// TestCheckCatchesLostIncrement makes sure the history check is not vacuous.
func TestCheckCatchesLostIncrement(t *testing.T) {
	tests := []struct {
		name string
		sum  summary
		ok   bool
	}{
		{name: "good", sum: summary{final: 2, accepted: []write{{Token: 1, Value: 1}, {Token: 3, Value: 2}}, rejected: []write{{Worker: 0, Token: 2}}}, ok: true},
		{name: "lost_increment", sum: summary{final: 1, accepted: []write{{Token: 1, Value: 1}, {Token: 3, Value: 1}}, rejected: []write{{Worker: 0, Token: 2}}}},
		{name: "stale_accepted", sum: summary{final: 2, accepted: []write{{Token: 3, Value: 1}, {Token: 2, Value: 2}}, rejected: []write{{Worker: 0, Token: 1}}}},
		{name: "fresh_write_refused", sum: summary{final: 1, accepted: []write{{Token: 1, Value: 1}}, rejected: []write{{Worker: 1, Token: 2}}}},
		{name: "stall_not_refused", sum: summary{final: 1, accepted: []write{{Token: 1, Value: 1}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.sum.check(true, 0)
			if (err == nil) != tt.ok {
				t.Errorf("check() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
