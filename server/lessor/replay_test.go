package lessor_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/lessor"
)

// earlier is an AppliedAt hook: the times an earlier run of the node applied
// some indexes (docs/design.md#leases).
type earlier map[uint64]time.Time

func (e earlier) at(index uint64) (time.Time, bool) {
	t, ok := e[index]
	return t, ok
}

// TestReplayMeasuredFromEarlierApply: a lease whose Grant, Renew,
// CreateSession or KeepAlive an earlier run applied (a replay after a
// restart, or a snapshot reconciled at start) is measured from that run's
// apply, so the restart does not stretch it; one no earlier run applied is
// measured from now, and a recorded time after now is never used (the lease
// is never measured from later than its own apply).
func TestReplayMeasuredFromEarlierApply(t *testing.T) {
	var at earlier
	h := newHarness(t, func(c *lessor.Config) {
		c.AppliedAt = func(index uint64) (time.Time, bool) { return at.at(index) }
	})
	start := h.clock.Now()
	h.clock.Advance(600 * time.Millisecond) // the restart's replay runs now
	at = earlier{
		1: start,                             // a's Grant
		2: start.Add(100 * time.Millisecond), // b's Grant
		3: start.Add(200 * time.Millisecond), // b's Renew
		4: start.Add(50 * time.Millisecond),  // the CreateSession
		5: start.Add(300 * time.Millisecond), // its KeepAlive
		6: h.clock.Now().Add(time.Second),    // c's Grant: after now, ignored
	}
	ta := h.grant("a", 1000)
	tb := h.grant("b", 1000)
	h.renew("b", tb)
	s := h.createSession(1000)
	h.keepAlive(s)
	tc := h.grant("c", 1000)
	td := h.grant("d", 1000) // index 7: no earlier run applied it

	for _, want := range []struct {
		key   string
		token uint64
		left  time.Duration
	}{{"a", ta, 400 * time.Millisecond}, {"b", tb, 600 * time.Millisecond}, {"c", tc, time.Second}, {"d", td, time.Second}} {
		got, ok := h.l.Remaining(want.key, want.token)
		require.True(t, ok)
		assert.Equal(t, want.left, got, want.key)
	}
	got, ok := h.l.SessionRemaining(s)
	require.True(t, ok)
	assert.Equal(t, 700*time.Millisecond, got, "the session from its KeepAlive's earlier apply")

	// The same table restored from a snapshot into a fresh lessor (a
	// restart whose snapshot holds every lock) reconciles to the same
	// deadlines: each lock's ModIndex names its last Grant/Renew.
	var buf bytes.Buffer
	require.NoError(t, h.sm.WriteSnapshot(&buf))
	h2 := newHarness(t, func(c *lessor.Config) {
		c.AppliedAt = func(index uint64) (time.Time, bool) { return at.at(index) }
		c.Clock = h.clock
	})
	require.NoError(t, h2.sm.Restore(&buf))
	h2.l.Reconcile(h2.sm)
	got, _ = h2.l.Remaining("b", tb)
	assert.Equal(t, 600*time.Millisecond, got, "b from its Renew's earlier apply")
	got, _ = h2.l.SessionRemaining(s)
	assert.Equal(t, 700*time.Millisecond, got)

	// Promoted, the lessor expires a at 1000ms after its first apply, not
	// 1000ms after the replay.
	h.l.Promote(h.sm, testTerm)
	h.settle(1)
	h.clock.Advance(400 * time.Millisecond)
	h.expectExpire("a", ta)
}

// TestReplayWithoutRecord: without AppliedAt, a replayed lease starts at its
// replay (later than the client's start, never earlier), as before.
func TestReplayWithoutRecord(t *testing.T) {
	h := newHarness(t)
	h.clock.Advance(600 * time.Millisecond)
	ta := h.grant("a", 1000)
	got, _ := h.l.Remaining("a", ta)
	assert.Equal(t, time.Second, got)
}
