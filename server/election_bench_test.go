package server

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/memraft"
)

// BenchmarkApplyAcrossElection measures the apply hook (onApply) of the
// first command after an election, on a node whose table holds 10k, 100k
// and 1M locks restored from a snapshot: each iteration skips one index (the
// new term's no-op or empty entry, which never reaches the hook) and then
// applies a Renew through the hook, as every node does after every election
// (docs/design.md#replicated-commands). It should not grow with the table.
func BenchmarkApplyAcrossElection(b *testing.B) {
	for _, locks := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("locks=%d", locks), func(b *testing.B) {
			n := benchNode(b)
			data, index := benchSnapshot(b, locks)
			if err := n.sm.Restore(bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
			n.onRestore(index)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				index++
				n.sm.Skip(index)
				index++
				cmd := core.Renew(fmt.Sprintf("k%07d", i%locks), uint64(i%locks)+1)
				res, err := n.sm.Apply(index, cmd)
				if err != nil || res.Outcome != core.OutcomeRenewed {
					b.Fatalf("renew: %v %v", res.Outcome, err)
				}
				n.onApply(index, cmd, res)
			}
		})
	}
}

// benchNode starts a lone node over memraft (no disk, no network) and
// waits until it leads.
func benchNode(b *testing.B) *Node {
	b.Helper()
	cfg := config.DefaultConfig()
	cfg.ID = "n1"
	cfg.APIAddr = "127.0.0.1:1"
	cfg.RaftAddr = "127.0.0.1:2"
	cfg.DataDir = filepath.Join(b.TempDir(), "n1")
	n, err := New(cfg, WithBackend(func(bc backends.Config) (Backend, error) { return memraft.New(bc) }))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = n.Close(context.Background()) })
	deadline := time.Now().Add(time.Minute)
	for {
		_, recorded := n.sm.MemberAPIAddr("n1")
		if n.isPromoted() && recorded {
			return n
		}
		if time.Now().After(deadline) {
			b.Fatal("bench node did not lead")
		}
		time.Sleep(time.Millisecond)
	}
}

// benchSnapshot returns a snapshot of locks exclusive locks k0000000...
// (tokens 1...) with 10-minute leases, and its applied index.
func benchSnapshot(b *testing.B, locks int) ([]byte, uint64) {
	b.Helper()
	sm := core.NewStateMachine()
	for i := range locks {
		if _, err := sm.Apply(uint64(i+1), core.Grant(fmt.Sprintf("k%07d", i), 600_000, "o")); err != nil {
			b.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := sm.WriteSnapshot(&buf); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes(), sm.AppliedIndex()
}
