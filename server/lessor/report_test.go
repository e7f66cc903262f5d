package lessor_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/lessor"
)

// remaining is the leader's own measure of (key, token)'s lease.
func (h *harness) remaining(key string, token uint64) time.Duration {
	h.t.Helper()
	d, ok := h.l.Remaining(key, token)
	require.True(h.t, ok, "%s/%d tracked", key, token)
	return d
}

// TestLowerTakesEarlierReportsOnly: a report of the same seen index with
// less time left lowers the leader's deadline, and the lock is expired by
// it, not a moment before the reported time; a report with more time left
// never lengthens it back.
func TestLowerTakesEarlierReportsOnly(t *testing.T) {
	h := newHarness(t)
	tok := h.grant("a", 10_000) // index 1
	h.l.Promote(h.sm, testTerm)
	h.settle(1)
	h.clock.Advance(time.Second)
	h.settle(1)

	res := h.l.Lower(testTerm, []lessor.Report{{Key: "a", Token: tok, Seen: 1, Remaining: 3 * time.Second}})
	assert.Equal(t, lessor.LowerResult{Lowered: 1}, res)
	assert.Equal(t, 3*time.Second, h.remaining("a", tok))

	res = h.l.Lower(testTerm, []lessor.Report{{Key: "a", Token: tok, Seen: 1, Remaining: 5 * time.Second}})
	assert.Equal(t, lessor.LowerResult{Kept: 1}, res)
	assert.Equal(t, 3*time.Second, h.remaining("a", tok), "a later report never lengthens a lease")

	h.settle(1)
	h.clock.Advance(3*time.Second - time.Millisecond)
	h.settle(1)
	h.expectNoExpire()
	h.clock.Advance(time.Millisecond)
	h.expectExpire("a", tok)
}

// TestLowerIgnoresOtherSeenIndexesAndGarbage: a report measured from
// another Grant/Renew than the leader's (an older one, from before a Renew;
// a newer one the leader has not applied), of a lease the leader does not
// track, or malformed (negative, longer than the lease, naming both a lock
// and a session, or neither) changes no deadline.
func TestLowerIgnoresOtherSeenIndexesAndGarbage(t *testing.T) {
	h := newHarness(t)
	tok := h.grant("a", 10_000) // index 1
	h.renew("a", tok)           // index 2
	id := h.createSession(10_000)
	h.l.Promote(h.sm, testTerm)
	h.settle(1)

	res := h.l.Lower(testTerm, []lessor.Report{
		{Key: "a", Token: tok, Seen: 1, Remaining: 0},                 // from before the Renew
		{Key: "a", Token: tok, Seen: 9, Remaining: 0},                 // not applied here
		{Key: "b", Token: tok, Seen: 2, Remaining: 0},                 // not tracked
		{Session: id + 1, Seen: 3, Remaining: 0},                      // no such session
		{Session: id, Seen: 2, Remaining: 0},                          // the session's seen is 3
		{Key: "a", Token: tok, Seen: 2, Remaining: -time.Millisecond}, // negative
		{Key: "a", Token: tok, Seen: 2, Remaining: 11 * time.Second},  // longer than the lease
		{Key: "a", Token: tok, Session: id, Seen: 2},                  // both
		{Token: tok, Seen: 2},                                         // neither
		{Session: id, Token: 1, Seen: 3},                              // a session with a token
	})
	assert.Equal(t, lessor.LowerResult{Stale: 5, Invalid: 5}, res)
	assert.Equal(t, 10*time.Second, h.remaining("a", tok))
	left, ok := h.l.SessionRemaining(id)
	require.True(t, ok)
	assert.Equal(t, 10*time.Second, left)
}

// TestLowerDiscardedOffTerm: reports that arrive before a promotion, after
// a demotion, or for another term than the one promoted in change nothing.
func TestLowerDiscardedOffTerm(t *testing.T) {
	h := newHarness(t)
	tok := h.grant("a", 10_000)
	r := []lessor.Report{{Key: "a", Token: tok, Seen: 1, Remaining: time.Second}}

	assert.True(t, h.l.Lower(testTerm, r).Discarded, "not primary yet")
	h.l.Promote(h.sm, testTerm)
	assert.True(t, h.l.Lower(testTerm-1, r).Discarded, "an older term's gathering")
	h.l.Demote()
	assert.True(t, h.l.Lower(testTerm, r).Discarded, "demoted since")
	assert.Equal(t, 10*time.Second, h.remaining("a", tok))
}

// TestReportsRoundTrip: a voter's reports (LockReports, SessionReports)
// name each lease it times with its seen index and time left, rounded up
// to whole milliseconds, skip holders under a session (their session
// answers) and untracked entries; a leader that measured later lowers both
// the lock and the session to them, and expires the session by the report.
func TestReportsRoundTrip(t *testing.T) {
	voter, leader := newHarness(t), newHarness(t)
	var held uint64
	for _, h := range []*harness{voter, leader} {
		h.grant("a", 10_000)                                          // index 1, token 1
		id := h.createSession(10_000)                                 // index 2
		held = h.grantUnder(core.Grant("s", 0, "owner-s"), id)        // index 3
		h.applyAt(core.Grant("untracked", 10_000, "owner-untracked")) // not told to the lessor
		h.clock.Advance(100 * time.Millisecond)
	}
	voter.clock.Advance(2*time.Second + 500*time.Microsecond)

	var locks []core.Lock
	voter.sm.Ascend(func(lk core.Lock) bool { locks = append(locks, lk); return true })
	var sessions []core.Session
	voter.sm.AscendSessions(func(s core.Session) bool { sessions = append(sessions, s); return true })
	reports := voter.l.LockReports(locks, nil)
	reports = voter.l.SessionReports(sessions, reports)
	left := 10*time.Second - 2*time.Second - 100*time.Millisecond // rounded up from 7.8995 s
	require.Equal(t, []lessor.Report{
		{Key: "a", Token: 1, Seen: 1, Remaining: left},
		{Session: 2, Seen: 2, Remaining: left},
	}, reports)

	leader.l.Promote(leader.sm, testTerm)
	leader.settle(1)
	assert.Equal(t, lessor.LowerResult{Lowered: 2}, leader.l.Lower(testTerm, reports))
	assert.Equal(t, left, leader.remaining("a", 1))
	assert.Equal(t, left, leader.remaining("s", held), "a holder under the session goes by the session's report")

	leader.settle(1)
	leader.clock.Advance(left)
	leader.expectExpire("a", 1)
	leader.expectSessionExpire(2)
}
