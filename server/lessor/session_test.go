package lessor_test

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/lessor"
)

// createSession applies a CreateSession and tells the lessor, as the
// server's OnApply does; it returns the session's id.
func (h *harness) createSession(ttlMS int64) uint64 {
	res, index := h.applyAt(core.CreateSession(ttlMS))
	require.Equal(h.t, core.OutcomeSessionCreated, res.Outcome)
	h.l.TrackSession(res.Session, res.LeaseMS, index)
	return res.Session
}

// keepAlive applies a KeepAliveSession and tells the lessor.
func (h *harness) keepAlive(id uint64) {
	res, index := h.applyAt(core.KeepAliveSession(id))
	require.Equal(h.t, core.OutcomeRenewed, res.Outcome)
	h.l.TrackSession(res.Session, res.LeaseMS, index)
}

// grantUnder applies a Grant of key under session id and tells the lessor.
func (h *harness) grantUnder(cmd core.Command, id uint64) uint64 {
	res, _ := h.applyAt(cmd.WithSession(id))
	require.Equal(h.t, core.OutcomeGranted, res.Outcome)
	require.Equal(h.t, id, res.Session)
	h.l.TrackUnder(cmd.Key, res.Token, res.Session)
	return res.Token
}

// sessionEnded tells the lessor what a session's end removed, as the
// server's OnApply does.
func (h *harness) sessionEnded(id uint64, end *core.SessionEnd) {
	h.l.SessionEnded(id)
	for _, lk := range end.Locks {
		h.l.Removed(lk.Key, lk.Token)
	}
	for _, d := range end.Delays {
		h.l.Delay(d.Key, d.LockDelayMS)
	}
}

func (h *harness) expectSessionExpire(id uint64) {
	h.t.Helper()
	select {
	case got := <-h.sessExp:
		assert.Equal(h.t, id, got)
	case <-time.After(wait):
		h.t.Fatalf("no ExpireSession(%d) proposed", id)
	}
}

func (h *harness) expectNoSessionExpire() {
	h.t.Helper()
	select {
	case got := <-h.sessExp:
		h.t.Fatalf("unexpected ExpireSession(%d)", got)
	default:
	}
}

// TestSessionTimesItsHolders: holders under a session have no lease of their
// own; the session's KeepAlive restarts the remaining time of all of them,
// and when the session's lease runs out one ExpireSession ends it and removes
// every holder (docs/design.md#sessions).
func TestSessionTimesItsHolders(t *testing.T) {
	h := newHarness(t)
	h.l.Promote(h.sm, testTerm)
	id := h.createSession(1000)
	ta := h.grantUnder(core.Grant("a", 0, "o"), id)
	tb := h.grantUnder(core.Grant("b", 0, "o"), id)
	assert.Equal(t, 2, h.l.Len())
	assert.Equal(t, 1, h.l.Sessions())
	h.settle(1) // one timer: the session's, none for its holders

	h.clock.Advance(600 * time.Millisecond)
	h.settle(1)
	for _, c := range []struct {
		key string
		tok uint64
	}{{"a", ta}, {"b", tb}} {
		rem, ok := h.l.Remaining(c.key, c.tok)
		require.True(t, ok)
		assert.Equal(t, 400*time.Millisecond, rem, c.key)
	}
	h.keepAlive(id)
	for _, c := range []struct {
		key string
		tok uint64
	}{{"a", ta}, {"b", tb}} {
		rem, _ := h.l.Remaining(c.key, c.tok)
		assert.Equal(t, time.Second, rem, "%s: the KeepAlive restarted it", c.key)
	}
	keepIndex := h.sm.AppliedIndex()
	h.mu.Lock()
	h.seen = nil
	h.mu.Unlock()

	h.clock.Advance(999 * time.Millisecond)
	h.settle(1)
	h.expectNoSessionExpire()
	h.expectNoExpire()
	h.clock.Advance(time.Millisecond)
	h.expectSessionExpire(id)
	h.expectNoExpire() // no per-holder Expire
	h.mu.Lock()
	assert.Equal(t, []uint64{keepIndex}, h.seen, "the ExpireSession carries the KeepAlive's index")
	h.mu.Unlock()
	assert.Empty(t, h.sm.Holders("a"))
	assert.Empty(t, h.sm.Holders("b"))
	_, open := h.sm.Session(id)
	assert.False(t, open)
	assert.Equal(t, 0, h.l.Len())
	assert.Equal(t, 0, h.l.Sessions())
	_, ok := h.l.Remaining("a", ta)
	assert.False(t, ok)
}

// TestTrackSkipsSessionHolder: a Renew applied for a holder under a session
// (the server refuses them, but an old log may hold one) does not give it a
// lease of its own: it still follows its session.
func TestTrackSkipsSessionHolder(t *testing.T) {
	h := newHarness(t)
	h.l.Promote(h.sm, testTerm)
	id := h.createSession(5000)
	tok := h.grantUnder(core.Grant("a", 0, "o"), id)
	h.renew("a", tok) // Track with the holder's lease_ms (5000) at now
	assert.Equal(t, 1, h.l.Len(), "no lease of its own")
	h.settle(1)
	h.clock.Advance(4 * time.Second)
	h.keepAlive(id)
	h.clock.Advance(1500 * time.Millisecond) // past the renewal's 5 s
	h.settle(1)
	h.expectNoExpire()
	h.expectNoSessionExpire()
	rem, _ := h.l.Remaining("a", tok)
	assert.Equal(t, 3500*time.Millisecond, rem)
}

// TestSessionRefusals: SessionRenewable and Regrant of a holder under a
// session answer by the session's lease.
func TestSessionRefusals(t *testing.T) {
	t.Run("not_primary", func(t *testing.T) {
		h := newHarness(t)
		id := h.createSession(1000)
		require.ErrorIs(t, h.l.SessionRenewable(id), lessor.ErrNotPrimary)
	})
	t.Run("unknown", func(t *testing.T) {
		h := newHarness(t)
		h.l.Promote(h.sm, testTerm)
		require.ErrorIs(t, h.l.SessionRenewable(42), lessor.ErrNotHeld)
		_, ok := h.l.SessionRemaining(42)
		assert.False(t, ok)
	})
	t.Run("after_deadline", func(t *testing.T) {
		h := newHarness(t)
		h.mu.Lock()
		h.expErr = assert.AnError // keeps the session in the table
		h.mu.Unlock()
		id := h.createSession(100)
		tok := h.grantUnder(core.Grant("a", 0, "o"), id)
		h.l.Promote(h.sm, testTerm)
		require.NoError(t, h.l.SessionRenewable(id))
		require.NoError(t, h.l.Regrant("a", tok))
		assert.False(t, h.l.SessionExpiring(id))
		assert.False(t, h.l.Expiring("a", tok))
		h.settle(1)
		h.clock.Advance(100 * time.Millisecond)
		h.expectSessionExpire(id)
		require.ErrorIs(t, h.l.SessionRenewable(id), lessor.ErrExpired)
		require.ErrorIs(t, h.l.Regrant("a", tok), lessor.ErrExpired)
		assert.True(t, h.l.SessionExpiring(id))
		assert.True(t, h.l.Expiring("a", tok), "a holder under an expiring session is expiring")
		rem, ok := h.l.SessionRemaining(id)
		assert.True(t, ok)
		assert.Zero(t, rem)
	})
}

// TestKeepAliveBetweenDecisionAndApplyWins: a KeepAlive that commits after
// the leader decided a session's expiry keeps the session and its holders:
// the ExpireSession carries the older seen index.
func TestKeepAliveBetweenDecisionAndApplyWins(t *testing.T) {
	h := newHarness(t)
	block := make(chan struct{})
	var unblock sync.Once
	t.Cleanup(func() { unblock.Do(func() { close(block) }) })
	h.mu.Lock()
	h.block = block
	h.mu.Unlock()
	h.l.Promote(h.sm, testTerm)
	id := h.createSession(100)
	tok := h.grantUnder(core.Grant("a", 0, "o"), id)
	h.settle(1)
	h.clock.Advance(100 * time.Millisecond)
	h.expectSessionExpire(id) // decided and proposed, not applied
	h.keepAlive(id)           // a KeepAlive admitted earlier commits first
	assert.False(t, h.l.SessionExpiring(id))
	applied := h.sm.AppliedIndex()
	h.mu.Lock()
	h.block = nil
	h.mu.Unlock()
	unblock.Do(func() { close(block) })
	require.Eventually(t, func() bool { return h.sm.AppliedIndex() == applied+1 }, wait, time.Millisecond)
	_, open := h.sm.Session(id)
	require.True(t, open, "the KeepAlive won")
	_, held := h.sm.Holder("a", tok)
	require.True(t, held)
	h.settle(1)
	h.clock.Advance(100 * time.Millisecond)
	h.expectSessionExpire(id)
	_, open = h.sm.Session(id)
	assert.False(t, open)
}

// TestSharedHoldersTimedApart: every holder of a shared key has its own
// lease; releasing one leaves the other timed.
func TestSharedHoldersTimedApart(t *testing.T) {
	h := newHarness(t)
	h.l.Promote(h.sm, testTerm)
	t1 := h.grantWith(core.Grant("a", 1000, "o1").WithMode(core.ModeShared))
	h.clock.Advance(200 * time.Millisecond)
	t2 := h.grantWith(core.Grant("a", 1000, "o2").WithMode(core.ModeShared))
	assert.Equal(t, 2, h.l.Len())
	h.apply(core.Release("a", t1))
	h.l.Removed("a", t1)
	assert.Equal(t, 1, h.l.Len())
	rem, ok := h.l.Remaining("a", t2)
	require.True(t, ok)
	assert.Equal(t, time.Second, rem)
	h.settle(1)
	h.clock.Advance(time.Second)
	h.expectExpire("a", t2)
	assert.Empty(t, h.sm.Holders("a"))
}

// TestReconcileSessions: after a snapshot restore the lessor times the
// sessions the table holds (from now + TTL) and attaches their holders;
// ended ones are forgotten.
func TestReconcileSessions(t *testing.T) {
	h := newHarness(t)
	gone := h.createSession(1000)
	h.grantUnder(core.Grant("x", 0, "o"), gone)

	other := core.NewStateMachine()
	apply := func(index uint64, cmd core.Command) core.Result {
		res, err := other.Apply(index, cmd)
		require.NoError(t, err)
		return res
	}
	apply(1, core.Noop())
	apply(2, core.Noop())
	id := apply(3, core.CreateSession(2000)).Session
	tok := apply(4, core.Grant("a", 0, "o").WithSession(id)).Token
	var buf bytes.Buffer
	require.NoError(t, other.WriteSnapshot(&buf))
	require.NoError(t, h.sm.Restore(&buf))
	h.applyMu.Lock()
	h.index = h.sm.AppliedIndex()
	h.applyMu.Unlock()

	h.l.Reconcile(h.sm)
	assert.Equal(t, 1, h.l.Sessions())
	assert.Equal(t, 1, h.l.Len())
	rem, ok := h.l.SessionRemaining(id)
	require.True(t, ok)
	assert.Equal(t, 2*time.Second, rem)
	rem, ok = h.l.Remaining("a", tok)
	require.True(t, ok)
	assert.Equal(t, 2*time.Second, rem, "the holder follows its session")
	_, ok = h.l.SessionRemaining(gone)
	assert.False(t, ok)

	h.l.Promote(h.sm, testTerm)
	h.settle(1)
	h.clock.Advance(2 * time.Second)
	h.expectSessionExpire(id)
	assert.Empty(t, h.sm.Holders("a"))
}
