package lessor_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/lessor"
)

// spyTable is the lock table with every full read (Ascend, AscendSessions,
// AscendLockDelays) counted: a spy below the lessor.
type spyTable struct {
	*core.StateMachine
	reads atomic.Int64
}

func (s *spyTable) Ascend(fn func(core.Lock) bool) {
	s.reads.Add(1)
	s.StateMachine.Ascend(fn)
}

func (s *spyTable) AscendSessions(fn func(core.Session) bool) {
	s.reads.Add(1)
	s.StateMachine.AscendSessions(fn)
}

func (s *spyTable) AscendLockDelays(fn func(core.LockDelay) bool) {
	s.reads.Add(1)
	s.StateMachine.AscendLockDelays(fn)
}

// TestPromoteReadsNoTable: promotion re-arms what changed since this node
// last led, without reading the table (docs/design.md#leases): a lock whose
// expiry was waiting for a retry when this node was demoted is expired at
// once by its deadline, every other lock keeps its deadline; only a restore
// the lessor has not reconciled with makes it read the table.
func TestPromoteReadsNoTable(t *testing.T) {
	h := newHarness(t)
	table := &spyTable{StateMachine: h.sm}
	for i := range 100 {
		h.grant(fmt.Sprintf("k%03d", i), 5000)
	}
	h.l.Promote(table, testTerm)
	tok := h.grant("a", 100)
	h.settle(1)
	h.mu.Lock()
	h.confirm = func(context.Context) error { return &core.NotLeaderError{} }
	h.mu.Unlock()
	h.clock.Advance(100 * time.Millisecond)
	<-h.confirms
	h.settle(1) // "a" re-armed for a retry in 500ms, marked expiring
	h.l.Demote()
	h.settle(0)
	h.mu.Lock()
	h.confirm = nil
	h.term = testTerm + 1
	h.mu.Unlock()

	h.l.Promote(table, testTerm+1)
	h.expectExpire("a", tok) // at once: its deadline passed
	assert.Zero(t, table.reads.Load(), "promotion read the table")
	assert.Zero(t, h.l.Reconciles())
	rem, ok := h.l.Remaining("k000", 1)
	require.True(t, ok)
	assert.Equal(t, 4900*time.Millisecond, rem, "no reset at promotion")

	// A restore the lessor did not see: the next promotion reconciles.
	other := core.NewStateMachine()
	_, err := other.Apply(h.sm.AppliedIndex()+10, core.Grant("r", 2000, "o"))
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, other.WriteSnapshot(&buf))
	require.NoError(t, h.sm.Restore(&buf))
	h.l.Demote()
	h.l.Promote(table, testTerm+1)
	assert.Positive(t, table.reads.Load())
	assert.Equal(t, uint64(1), h.l.Reconciles())
	assert.Equal(t, 1, h.l.Len(), "tracks exactly the restored table")
	rem, ok = h.l.Remaining("r", 1)
	require.True(t, ok)
	assert.Equal(t, 2*time.Second, rem)
}

// TestResyncOnlyAfterRestore: gaps in the applied indexes (entries that are
// not commands) never make the lessor read the table; a restore does, once.
func TestResyncOnlyAfterRestore(t *testing.T) {
	h := newHarness(t)
	table := &spyTable{StateMachine: h.sm}
	h.grant("a", 1000)
	h.applyMu.Lock()
	h.index += 5 // a leader's no-op, a configuration change: not commands
	h.sm.Skip(h.index)
	h.applyMu.Unlock()
	h.grant("b", 1000)
	assert.False(t, h.l.Resync(table))
	assert.Zero(t, table.reads.Load())

	var buf bytes.Buffer
	require.NoError(t, h.sm.WriteSnapshot(&buf))
	require.NoError(t, h.sm.Restore(&buf))
	assert.True(t, h.l.Resync(table))
	assert.False(t, h.l.Resync(table), "once per restore")
	assert.Equal(t, uint64(1), h.l.Reconciles())
	assert.Equal(t, 2, h.l.Len())
}

// TestExpireProposalsBounded: a round of many due leases proposes at most
// Config.MaxInFlight Expires at once, and all of them in the end.
func TestExpireProposalsBounded(t *testing.T) {
	const leases, limit = 20, 3
	var inFlight, most atomic.Int64
	release := make(chan struct{})
	entered := make(chan struct{}, leases)
	h := newHarness(t, func(c *lessor.Config) {
		c.MaxInFlight = limit
		expire := c.Expire
		c.Expire = func(ctx context.Context, key string, token, seen uint64) error {
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			entered <- struct{}{}
			<-release
			inFlight.Add(-1)
			return expire(ctx, key, token, seen)
		}
	})
	h.l.Promote(h.sm, testTerm)
	for i := range leases {
		h.grant(fmt.Sprintf("k%02d", i), 100)
	}
	h.settle(1)
	h.clock.Advance(100 * time.Millisecond)
	for range leases {
		select {
		case <-entered:
		case <-time.After(wait):
			t.Fatal("an Expire was never proposed")
		}
		for range 100 { // let any proposal past the bound start
			runtime.Gosched()
		}
		release <- struct{}{}
	}
	for range leases {
		select {
		case <-h.expires:
		case <-time.After(wait):
			t.Fatal("an Expire did not apply")
		}
	}
	assert.LessOrEqual(t, most.Load(), int64(limit))
	assert.Zero(t, h.sm.Len())
}

// TestDelaysEndInOrder: lock-delays end in end order whatever order they
// were set in; one ended by a grant of its key or replaced by a later delay
// of the key ends only as its last setting says.
func TestDelaysEndInOrder(t *testing.T) {
	h := newHarness(t)
	for i, ms := range []int64{500, 100, 400, 200, 300} {
		h.l.Delay(fmt.Sprintf("d%d", i), ms)
	}
	h.grant("d2", 1000)   // the 400ms delay ends with the grant
	h.l.Delay("d1", 1000) // the 100ms delay is replaced
	assert.Equal(t, 4, h.l.Delays())
	var got []string
	for _, step := range []time.Duration{200, 100, 200, 500} {
		h.settle(1) // asleep until the next delay ends (not primary)
		h.clock.Advance(step * time.Millisecond)
		select {
		case key := <-h.delayEnds:
			got = append(got, key)
		case <-time.After(wait):
			t.Fatalf("no delay ended after %v more", step)
		}
	}
	assert.Equal(t, []string{"d3", "d4", "d0", "d1"}, got)
	assert.Zero(t, h.l.Delays())
}
