package lessor_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/lessor"
)

// BenchmarkReconcile measures Reconcile of a table of 100k, 300k and 1M
// exclusive locks restored from a snapshot (10-minute leases): into a
// lessor that tracks nothing ("empty": a restarted node restoring its
// snapshot, a direct load), and into one that already tracks every lock
// from the same Grants ("tracked": a follower installing the leader's
// snapshot, a comparison that keeps every deadline).
func BenchmarkReconcile(b *testing.B) {
	for _, locks := range []int{100_000, 300_000, 1_000_000} {
		var buf bytes.Buffer
		if err := reconcileTable(b, locks).WriteSnapshot(&buf); err != nil {
			b.Fatal(err)
		}
		data := buf.Bytes()
		b.Run(fmt.Sprintf("locks=%d/empty", locks), func(b *testing.B) {
			sm := core.NewStateMachine()
			if err := sm.Restore(bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				l := newBenchLessor(b)
				b.StartTimer()
				l.Reconcile(sm)
				b.StopTimer()
				if l.Len() != locks {
					b.Fatalf("tracks %d locks, want %d", l.Len(), locks)
				}
				_ = l.Close()
				b.StartTimer()
			}
		})
		b.Run(fmt.Sprintf("locks=%d/tracked", locks), func(b *testing.B) {
			sm := core.NewStateMachine()
			if err := sm.Restore(bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
			l := newBenchLessor(b)
			defer func() { _ = l.Close() }()
			l.Reconcile(sm) // tracks every lock: the timed ones compare
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if err := sm.Restore(bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				l.Reconcile(sm)
			}
		})
	}
}

// reconcileTable returns a state machine holding locks exclusive locks
// k0000000... with 10-minute leases, one Grant per index.
func reconcileTable(b *testing.B, locks int) *core.StateMachine {
	b.Helper()
	sm := core.NewStateMachine()
	for i := range locks {
		if _, err := sm.Apply(uint64(i+1), core.Grant(fmt.Sprintf("k%07d", i), 600_000, "o")); err != nil {
			b.Fatal(err)
		}
	}
	return sm
}

// newBenchLessor returns a lessor on the real clock that never expires.
func newBenchLessor(b testing.TB) *lessor.Lessor {
	l, err := lessor.New(lessor.Config{
		Confirm:       func(context.Context) (uint64, error) { return 0, context.Canceled },
		Expire:        func(context.Context, string, uint64, uint64) error { return nil },
		ExpireSession: func(context.Context, uint64, uint64) error { return nil },
	})
	if err != nil {
		b.Fatal(err)
	}
	return l
}
