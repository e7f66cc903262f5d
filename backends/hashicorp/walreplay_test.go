package hashicorp

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/core"
)

// TestWALReplayCache: a reopened raft-wal store answers the reads of the
// entries its full read at open decoded from memory (walreplay.go) — the
// configuration scan and the apply of a restart read each entry twice —
// with the entries raft-wal holds, until they are applied (replayed) or
// the log changes at their index: a conflicting suffix replaced, a prefix
// compacted away.
func TestWALReplayCache(t *testing.T) {
	dataDir, _ := walWithEntries(t) // entries 1-100
	s, err := openWAL(dataDir)
	must(t, err)
	defer closeStore(t, s)
	replay := &s.(*walStore).replay
	served := func(want uint64) {
		t.Helper()
		if got := replay.Served(); got != want {
			t.Fatalf("%d reads served from memory, want %d", got, want)
		}
	}

	requireLogs(t, s, 1, 100, between(1, 100)) // the configuration scan
	served(100)
	requireLogs(t, s, 1, 100, between(1, 100)) // the apply
	served(200)

	s.replayed(40) // applied up to 40: those are read from raft-wal now
	requireLogs(t, s, 1, 100, between(1, 100))
	served(260)

	// A follower drops a conflicting suffix and stores the leader's
	// entries there: a read gets the new entry, never the one kept.
	must(t, s.DeleteRange(81, 100))
	var other []*raft.Log
	for _, l := range entries(81, 90) {
		l.Term += 100
		l.Data = append([]byte("leader's "), l.Data...)
		other = append(other, l)
	}
	must(t, s.StoreLogs(other))
	for _, want := range other {
		var got raft.Log
		must(t, s.GetLog(want.Index, &got))
		if !sameLog(&got, want) {
			t.Fatalf("GetLog(%d) = %+v, want the leader's %+v", want.Index, got, want)
		}
	}
	var l raft.Log
	if err := s.GetLog(91, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(91) after the suffix was replaced = %v, want ErrLogNotFound", err)
	}
	served(260)

	// A compaction up to 60: those are gone, 61-80 are still kept.
	must(t, s.DeleteRange(1, 60))
	requireLogs(t, s, 1, 60, func(uint64) bool { return false })
	requireLogs(t, s, 61, 80, between(61, 80))
	served(280)
	s.replayed(90)
	if replay.logs != nil || replay.held != 0 {
		t.Fatalf("every entry applied, yet %d kept", replay.held)
	}
}

// TestRestartReadsTheLogOnce: a one-voter node on the raft-wal store,
// restarted over 200 commands (no snapshot), applies them again, and
// hashicorp/raft's two reads of each at start (NewRaft's configuration
// scan, then the apply) are served from what the store's full read at
// open kept, so raft-wal is read once per entry rather than three times.
func TestRestartReadsTheLogOnce(t *testing.T) {
	const commands = 200
	ctx, cancel := context.WithTimeout(context.Background(), backendtest.WaitTimeout)
	defer cancel()
	events := make(chan core.LeaderEvent, 16)
	cfg := single(t, t.TempDir(), events)
	cfg.LogStore = backends.LogStoreWAL
	cfg.SnapshotThreshold = 1 << 20
	n, err := New(cfg)
	must(t, err)
	waitReady(ctx, t, events)
	for i := range commands {
		if _, err := n.Propose(ctx, core.Grant(fmt.Sprintf("k%d", i), 60_000, "o")); err != nil {
			t.Fatal(err)
		}
	}
	applied := cfg.StateMachine.AppliedIndex()
	must(t, n.Close())

	cfg.StateMachine = core.NewStateMachine()
	n, err = New(cfg)
	must(t, err)
	defer func() { _ = n.Close() }()
	waitReady(ctx, t, events)
	for cfg.StateMachine.AppliedIndex() < applied {
		select {
		case <-ctx.Done():
			t.Fatalf("applied %d of %d after the restart", cfg.StateMachine.AppliedIndex(), applied)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if got := cfg.StateMachine.HolderLen(); got != commands {
		t.Fatalf("%d locks after the restart, want %d", got, commands)
	}
	if served := n.store.(*walStore).replay.Served(); served < 2*commands {
		t.Fatalf("%d of raft's reads at start served from memory, want at least %d (each command's entry twice)", served, 2*commands)
	}
}
