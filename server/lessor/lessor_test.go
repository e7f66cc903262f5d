package lessor_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/internal/fakeclock"
	"github.com/ticketd/ticketd/server/lessor"
)

// wait is the real-time safety net for a channel receive; no assertion
// depends on it being short.
const wait = 10 * time.Second

// testTerm is the Raft term the harness promotes in and confirms.
const testTerm = 7

type expireCall struct {
	key   string
	token uint64
}

// harness is a lessor over a real state machine with a fake clock; its Expire
// hook applies core.Expire to the state machine (as a single-node commit
// would) and reports each call.
type harness struct {
	t         *testing.T
	clock     *fakeclock.Clock
	sm        *core.StateMachine
	l         *lessor.Lessor
	applyMu   sync.Mutex
	index     uint64
	mu        sync.Mutex
	confirm   func(context.Context) error
	term      uint64        // the term Confirm returns; 0 means testTerm
	block     chan struct{} // when set, Expire waits for it to close (in flight)
	expErr    error
	expires   chan expireCall
	confirms  chan struct{}
	delayEnds chan string
	seen      []uint64    // seen indexes of the Expires applied
	sessExp   chan uint64 // ExpireSession proposals, by session id, once applied
}

// newHarness starts a harness; edit, if any, changes the lessor's Config
// before New.
func newHarness(t *testing.T, edit ...func(*lessor.Config)) *harness {
	h := &harness{
		t:         t,
		clock:     fakeclock.New(),
		sm:        core.NewStateMachine(),
		expires:   make(chan expireCall, 100),
		confirms:  make(chan struct{}, 100),
		delayEnds: make(chan string, 100),
		sessExp:   make(chan uint64, 100),
	}
	cfg := lessor.Config{
		Clock:         h.clock,
		RetryInterval: 500 * time.Millisecond,
		Confirm: func(ctx context.Context) (uint64, error) {
			h.confirms <- struct{}{}
			h.mu.Lock()
			fn, term := h.confirm, h.term
			h.mu.Unlock()
			if term == 0 {
				term = testTerm
			}
			if fn != nil {
				return term, fn(ctx)
			}
			return term, nil
		},
		OnDelayEnd: func(key string) { h.delayEnds <- key },
		Expire: func(_ context.Context, key string, token, seen uint64) error {
			h.mu.Lock()
			block := h.block
			h.mu.Unlock()
			if block != nil {
				h.expires <- expireCall{key, token} // reported when proposed
				<-block
			}
			h.mu.Lock()
			err := h.expErr
			h.mu.Unlock()
			if err == nil {
				h.mu.Lock()
				h.seen = append(h.seen, seen)
				h.mu.Unlock()
				if res := h.apply(core.ExpireSeen(key, token, seen)); res.Existed {
					h.l.Removed(key, token)
					h.l.Delay(key, res.LockDelayMS)
				}
			}
			if block == nil {
				h.expires <- expireCall{key, token}
			}
			return err
		},
		ExpireSession: func(_ context.Context, id, seen uint64) error {
			h.mu.Lock()
			block, err := h.block, h.expErr
			h.mu.Unlock()
			if block != nil {
				h.sessExp <- id // reported when proposed
				<-block
			}
			if err == nil {
				h.mu.Lock()
				h.seen = append(h.seen, seen)
				h.mu.Unlock()
				if res := h.apply(core.ExpireSession(id, seen)); res.Ended != nil {
					h.sessionEnded(id, res.Ended)
				}
			}
			if block == nil {
				h.sessExp <- id
			}
			return err
		},
	}
	for _, fn := range edit {
		fn(&cfg)
	}
	l, err := lessor.New(cfg)
	require.NoError(t, err)
	h.l = l
	t.Cleanup(func() { _ = l.Close() })
	return h
}

func (h *harness) apply(cmd core.Command) core.Result {
	res, _ := h.applyAt(cmd)
	return res
}

// applyAt applies cmd and returns its result and log index.
func (h *harness) applyAt(cmd core.Command) (core.Result, uint64) {
	h.applyMu.Lock()
	defer h.applyMu.Unlock()
	h.index++
	res, err := h.sm.Apply(h.index, cmd)
	require.NoError(h.t, err)
	return res, h.index
}

// grant applies a grant and tells the lessor, as the server's OnApply does.
func (h *harness) grant(key string, leaseMS int64) uint64 {
	return h.grantWith(core.Grant(key, leaseMS, "owner-"+key))
}

// grantWith applies the Grant cmd and tells the lessor.
func (h *harness) grantWith(cmd core.Command) uint64 {
	res, index := h.applyAt(cmd)
	require.Equal(h.t, core.OutcomeGranted, res.Outcome)
	h.l.Track(cmd.Key, res.Token, res.LeaseMS, index)
	return res.Token
}

// renew applies a Renew and tells the lessor, as the server's OnApply does.
func (h *harness) renew(key string, token uint64) {
	res, index := h.applyAt(core.Renew(key, token))
	require.Equal(h.t, core.OutcomeRenewed, res.Outcome)
	h.l.Track(key, token, res.LeaseMS, index)
}

func (h *harness) expectExpire(key string, token uint64) {
	h.t.Helper()
	select {
	case c := <-h.expires:
		assert.Equal(h.t, expireCall{key, token}, c)
	case <-time.After(wait):
		h.t.Fatalf("no Expire(%s, %d) proposed", key, token)
	}
}

func (h *harness) expectNoExpire() {
	h.t.Helper()
	select {
	case c := <-h.expires:
		h.t.Fatalf("unexpected Expire(%s, %d)", c.key, c.token)
	default:
	}
}

// settle waits until the expiry loop has armed exactly n timers, i.e. it is
// asleep and has processed everything before.
func (h *harness) settle(n int) {
	h.t.Helper()
	require.True(h.t, h.clock.WaitTimers(n, wait), "loop did not arm %d timers (has %d)", n, h.clock.Timers())
}

func TestExpiresOnlyAfterLease(t *testing.T) {
	h := newHarness(t)
	tok := h.grant("a", 1000)
	h.l.Promote(h.sm, testTerm)
	h.settle(1)
	h.clock.Advance(999 * time.Millisecond)
	h.settle(1)
	h.expectNoExpire()
	rem, ok := h.l.Remaining("a", tok)
	require.True(t, ok)
	assert.Equal(t, time.Millisecond, rem)

	h.clock.Advance(time.Millisecond)
	h.expectExpire("a", tok)
	_, held := h.sm.Get("a")
	assert.False(t, held)
	assert.Equal(t, 0, h.l.Len())
}

func TestConfirmPrecedesExpire(t *testing.T) {
	h := newHarness(t)
	tok := h.grant("a", 100)
	h.l.Promote(h.sm, testTerm)
	h.settle(1)
	h.mu.Lock()
	h.confirm = func(context.Context) error { return &core.NotLeaderError{} }
	h.mu.Unlock()
	h.clock.Advance(100 * time.Millisecond)
	<-h.confirms
	h.settle(1) // re-armed for the retry
	h.expectNoExpire()
	assert.True(t, h.l.Expiring("a", tok), "a lease past its deadline is expiring even before its Expire commits")

	h.mu.Lock()
	h.confirm = nil
	h.mu.Unlock()
	h.clock.Advance(500 * time.Millisecond)
	h.expectExpire("a", tok)
}

func TestFailedExpireIsRetriedAndNeverRenewed(t *testing.T) {
	h := newHarness(t)
	tok := h.grant("a", 100)
	h.l.Promote(h.sm, testTerm)
	h.settle(1)
	h.mu.Lock()
	h.expErr = errors.New("proposal dropped")
	h.mu.Unlock()
	h.clock.Advance(100 * time.Millisecond)
	h.expectExpire("a", tok)
	h.settle(1)
	require.ErrorIs(t, h.l.Renewable("a", tok), lessor.ErrExpired)

	h.mu.Lock()
	h.expErr = nil
	h.mu.Unlock()
	h.clock.Advance(500 * time.Millisecond)
	h.expectExpire("a", tok)
	_, held := h.sm.Get("a")
	assert.False(t, held)
}

// TestRenewRestartsDeadlineFromApply: a Renew restarts the deadline at its
// local apply, not at the admission (every node measures from its own
// apply: docs/design.md#leases).
func TestRenewRestartsDeadlineFromApply(t *testing.T) {
	h := newHarness(t)
	tok := h.grant("a", 1000)
	h.l.Promote(h.sm, testTerm)
	h.settle(1)
	h.clock.Advance(600 * time.Millisecond)
	require.NoError(t, h.l.Renewable("a", tok))
	h.clock.Advance(50 * time.Millisecond) // the Renew commits later
	h.renew("a", tok)
	rem, _ := h.l.Remaining("a", tok)
	assert.Equal(t, time.Second, rem)

	h.clock.Advance(999 * time.Millisecond) // past the original deadline
	h.settle(1)
	h.expectNoExpire()
	h.clock.Advance(time.Millisecond)
	h.expectExpire("a", tok)
}

func TestRenewRefusals(t *testing.T) {
	t.Run("after_deadline", func(t *testing.T) {
		h := newHarness(t)
		h.mu.Lock()
		h.expErr = errors.New("hold")
		h.mu.Unlock()
		tok := h.grant("a", 100)
		h.l.Promote(h.sm, testTerm)
		h.settle(1)
		h.clock.Advance(100 * time.Millisecond)
		require.ErrorIs(t, h.l.Renewable("a", tok), lessor.ErrExpired)
	})
	t.Run("wrong_token", func(t *testing.T) {
		h := newHarness(t)
		tok := h.grant("a", 1000)
		h.l.Promote(h.sm, testTerm)
		require.ErrorIs(t, h.l.Renewable("a", tok+1), lessor.ErrNotHeld)
		require.ErrorIs(t, h.l.Renewable("b", tok), lessor.ErrNotHeld)
	})
	t.Run("not_primary", func(t *testing.T) {
		h := newHarness(t)
		tok := h.grant("a", 1000)
		require.ErrorIs(t, h.l.Renewable("a", tok), lessor.ErrNotPrimary)
	})
}

// TestPromoteKeepsDeadlines: no reset at promotion (docs/design.md#leases). A follower
// measures every lease from its own apply; the new leader expires by those
// deadlines, at once for one that has passed.
func TestPromoteKeepsDeadlines(t *testing.T) {
	h := newHarness(t)
	ta := h.grant("a", 1000)
	tb := h.grant("b", 5000)
	h.clock.Advance(1200 * time.Millisecond) // on a follower: tracked, not expired
	h.settle(0)
	h.expectNoExpire()
	rb, ok := h.l.Remaining("b", tb)
	require.True(t, ok)
	assert.Equal(t, 3800*time.Millisecond, rb)
	h.l.Promote(h.sm, testTerm)
	h.expectExpire("a", ta)
	rb, _ = h.l.Remaining("b", tb)
	assert.Equal(t, 3800*time.Millisecond, rb, "no fresh lease at promotion")
	h.settle(1)
	h.clock.Advance(3800 * time.Millisecond)
	h.expectExpire("b", tb)
}

// TestRenewBetweenDecisionAndApplyWins: a Renew that commits after the
// leader decided an Expire, before that Expire applies, keeps the lock: the
// Expire carries the older seen index and removes nothing
// (docs/design.md#replicated-commands).
func TestRenewBetweenDecisionAndApplyWins(t *testing.T) {
	h := newHarness(t)
	block := make(chan struct{})
	var unblock sync.Once
	t.Cleanup(func() { unblock.Do(func() { close(block) }) })
	h.mu.Lock()
	h.block = block
	h.mu.Unlock()
	h.l.Promote(h.sm, testTerm)
	tok := h.grant("a", 100)
	grantIndex := h.sm.AppliedIndex()
	h.settle(1)
	h.clock.Advance(100 * time.Millisecond)
	h.expectExpire("a", tok) // decided and proposed, not applied
	h.renew("a", tok)        // a renewal admitted earlier commits first
	h.mu.Lock()
	h.block = nil
	h.mu.Unlock()
	unblock.Do(func() { close(block) })
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.seen) == 1
	}, wait, time.Millisecond)
	h.mu.Lock()
	assert.Equal(t, []uint64{grantIndex}, h.seen, "the Expire carries the index of the Grant it saw")
	h.mu.Unlock()
	_, held := h.sm.Get("a")
	require.True(t, held, "the renewal won")
	rem, ok := h.l.Remaining("a", tok)
	require.True(t, ok, "still tracked")
	assert.Equal(t, 100*time.Millisecond, rem)
	h.settle(1)
	h.clock.Advance(100 * time.Millisecond)
	h.expectExpire("a", tok)
	_, held = h.sm.Get("a")
	assert.False(t, held)
}

// TestReconcile: after a snapshot restore the lessor tracks what the table
// holds: unknown locks from now + lease_ms, known ones unchanged, gone ones
// forgotten; recorded lock-delays start now.
func TestReconcile(t *testing.T) {
	h := newHarness(t)
	ta := h.grant("a", 1000)
	h.clock.Advance(400 * time.Millisecond)

	other := core.NewStateMachine()
	_, err := other.Apply(1, core.Noop())
	require.NoError(t, err)
	_, err = other.Apply(2, core.Grant("a", 1000, "owner-a")) // the same lock, changed at index 2
	require.NoError(t, err)
	_, err = other.Apply(3, core.Noop())
	require.NoError(t, err)
	_, err = other.Apply(4, core.Grant("z", 2000, "owner-z").WithLockDelay(300))
	require.NoError(t, err)
	_, err = other.Apply(5, core.Expire("z", 2))
	require.NoError(t, err)
	_, err = other.Apply(6, core.Grant("b", 2000, "owner-b"))
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, other.WriteSnapshot(&buf))
	require.NoError(t, h.sm.Restore(&buf))

	h.l.Reconcile(h.sm)
	ra, _ := h.l.Remaining("a", ta)
	assert.Equal(t, time.Second, ra, "a's ModIndex differs from the index tracked: restarted")
	rb, ok := h.l.Remaining("b", 3)
	require.True(t, ok)
	assert.Equal(t, 2*time.Second, rb)
	assert.Equal(t, 2, h.l.Len())
	assert.Equal(t, 300*time.Millisecond, h.l.Delayed("z"))

	h.clock.Advance(100 * time.Millisecond)
	h.l.Reconcile(h.sm) // nothing changed: nothing restarts
	ra, _ = h.l.Remaining("a", ta)
	assert.Equal(t, 900*time.Millisecond, ra)
}

// TestLockDelay: a delay recorded at an Expire's apply holds the key until
// it has passed on this node's clock, on a follower too, and ends with
// OnDelayEnd; a grant of the key ends it.
func TestLockDelay(t *testing.T) {
	h := newHarness(t)
	h.l.Delay("a", 300)
	h.l.Delay("b", 0)
	assert.Equal(t, 300*time.Millisecond, h.l.Delayed("a"))
	assert.Zero(t, h.l.Delayed("b"))
	assert.Equal(t, 1, h.l.Delays())
	h.settle(1)
	h.clock.Advance(299 * time.Millisecond)
	h.settle(1)
	assert.Equal(t, time.Millisecond, h.l.Delayed("a"))
	h.clock.Advance(time.Millisecond)
	select {
	case key := <-h.delayEnds:
		assert.Equal(t, "a", key)
	case <-time.After(wait):
		t.Fatal("no OnDelayEnd")
	}
	assert.Zero(t, h.l.Delayed("a"))

	h.l.Delay("c", 1000)
	h.grant("c", 100)
	assert.Zero(t, h.l.Delayed("c"), "a grant ends the delay")
}

// TestExpireStartsLockDelay: an Expire that removed a lock with a lock-delay
// starts it (through the hook, as the server's OnApply does).
func TestExpireStartsLockDelay(t *testing.T) {
	h := newHarness(t)
	h.l.Promote(h.sm, testTerm)
	tok := h.grantWith(core.Grant("a", 100, "o").WithLockDelay(500))
	h.settle(1)
	h.clock.Advance(100 * time.Millisecond)
	h.expectExpire("a", tok)
	assert.Equal(t, 500*time.Millisecond, h.l.Delayed("a"))
}

// TestDemoteStopsExpiry: a demoted lessor decides no expiry but keeps
// tracking (and measuring) every lease, so that it can lead again without a
// reset.
func TestDemoteStopsExpiry(t *testing.T) {
	h := newHarness(t)
	tok := h.grant("a", 1000)
	h.l.Promote(h.sm, testTerm)
	h.settle(1)
	h.l.Demote()
	h.settle(0)
	h.clock.Advance(time.Hour)
	h.settle(0)
	h.expectNoExpire()
	assert.False(t, h.l.Primary())
	assert.Equal(t, 1, h.l.Len())
	rem, ok := h.l.Remaining("a", tok)
	assert.True(t, ok)
	assert.Zero(t, rem)
	require.ErrorIs(t, h.l.Renewable("a", tok), lessor.ErrNotPrimary)
	h.grant("b", 10) // grants applied on a follower are tracked
	assert.Equal(t, 2, h.l.Len())
}

func TestRemovedLeaseNeverExpires(t *testing.T) {
	h := newHarness(t)
	h.l.Promote(h.sm, testTerm)
	tok := h.grant("a", 1000)
	h.settle(1)
	h.apply(core.Release("a", tok))
	h.l.Removed("a", tok)
	h.clock.Advance(time.Hour)
	h.settle(0)
	h.expectNoExpire()
	assert.Equal(t, 0, h.l.Len())
}

func TestRemovedOtherTokenIgnored(t *testing.T) {
	h := newHarness(t)
	h.l.Promote(h.sm, testTerm)
	tok := h.grant("a", 1000)
	h.l.Removed("a", tok+7)
	assert.Equal(t, 1, h.l.Len())
}

// TestRegrantAfterRetryApplied: a same-owner retry Grant restarts the lease
// at its apply (core ModIndex, like a Renew); Regrant then admits it.
func TestRegrantAfterRetryApplied(t *testing.T) {
	h := newHarness(t)
	h.l.Promote(h.sm, testTerm)
	tok := h.grant("a", 1000)
	h.clock.Advance(400 * time.Millisecond)
	require.Equal(t, tok, h.grant("a", 1000)) // the same owner retries
	rem, _ := h.l.Remaining("a", tok)
	assert.Equal(t, time.Second, rem, "the retry's apply restarts the lease")
	require.NoError(t, h.l.Regrant("a", tok))
}

func TestRegrantRefused(t *testing.T) {
	t.Run("deadline_passed", func(t *testing.T) {
		h := newHarness(t)
		h.l.Promote(h.sm, testTerm)
		tok := h.grant("a", 1000)
		h.clock.Advance(time.Second)
		require.ErrorIs(t, h.l.Regrant("a", tok), lessor.ErrExpired)
	})
	t.Run("other_token", func(t *testing.T) {
		h := newHarness(t)
		h.l.Promote(h.sm, testTerm)
		tok := h.grant("a", 1000)
		require.ErrorIs(t, h.l.Regrant("a", tok+1), lessor.ErrNotHeld)
	})
	t.Run("not_primary", func(t *testing.T) {
		h := newHarness(t)
		tok := h.grant("a", 1000)
		require.ErrorIs(t, h.l.Regrant("a", tok), lessor.ErrNotPrimary)
	})
}

// TestStaleRoundProposesNothing: a round whose epoch ended while it waited
// for its leadership confirmation proposes nothing: a stalled leader that
// wakes must not expire holders renewed through its successor
// (docs/design.md#leases).
func TestStaleRoundProposesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		term uint64 // what the confirmation returns
		flip bool   // demote and promote during the confirmation
	}{
		{name: "epoch_changed", term: testTerm, flip: true},
		{name: "other_term_confirmed", term: testTerm + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.l.Promote(h.sm, testTerm)
			tok := h.grant("a", 100)
			h.settle(1)
			once := sync.Once{}
			h.mu.Lock()
			h.confirm = func(context.Context) error {
				once.Do(func() {
					if tc.flip {
						h.l.Demote() // and promoted in a later term: both rounds confirm the old one
						h.l.Promote(h.sm, testTerm+1)
					}
				})
				return nil
			}
			h.mu.Unlock()
			h.mu.Lock()
			h.term = tc.term
			h.mu.Unlock()
			h.clock.Advance(100 * time.Millisecond)
			<-h.confirms
			require.NoError(t, h.l.Close()) // waits for the round to end
			h.expectNoExpire()
			_, held := h.sm.Get("a")
			assert.True(t, held, "lock %d still held", tok)
		})
	}
}

// TestNoRenewalUnderExpireInFlight: while an Expire of a lock is being
// proposed, the leader admits neither a renewal nor a retry of it, even after
// a retry's apply restarted its lease: the leader never answers with a lock
// whose Expire it has already proposed (docs/design.md#leases).
func TestNoRenewalUnderExpireInFlight(t *testing.T) {
	h := newHarness(t)
	block := make(chan struct{})
	var unblock sync.Once
	t.Cleanup(func() { unblock.Do(func() { close(block) }) })
	h.mu.Lock()
	h.block = block
	h.expErr = errors.New("hold")
	h.mu.Unlock()
	h.l.Promote(h.sm, testTerm)
	tok := h.grant("a", 100)
	h.settle(1)
	h.clock.Advance(100 * time.Millisecond)
	h.expectExpire("a", tok)
	h.grant("a", 100) // a retry applies
	require.ErrorIs(t, h.l.Regrant("a", tok), lessor.ErrExpired)
	require.ErrorIs(t, h.l.Renewable("a", tok), lessor.ErrExpired)
}

func TestManyLeasesExpireInDeadlineOrder(t *testing.T) {
	h := newHarness(t)
	h.l.Promote(h.sm, testTerm)
	toks := map[string]uint64{}
	for i, k := range []string{"c", "a", "b"} {
		toks[k] = h.grant(k, int64(100*(i+1)))
	}
	h.settle(1)
	h.clock.Advance(100 * time.Millisecond)
	h.expectExpire("c", toks["c"])
	h.settle(1)
	h.clock.Advance(250 * time.Millisecond)
	got := map[expireCall]bool{}
	for range 2 {
		select {
		case c := <-h.expires:
			got[c] = true
		case <-time.After(wait):
			t.Fatal("missing expiry")
		}
	}
	assert.Equal(t, map[expireCall]bool{{"a", toks["a"]}: true, {"b", toks["b"]}: true}, got)
}

func TestNewValidates(t *testing.T) {
	_, err := lessor.New(lessor.Config{})
	require.Error(t, err)
}

// TestExpireInFlightAcrossEpochs: an Expire proposed in one epoch may still
// commit after a demote and re-promote; until it returns, the new epoch keeps
// that lock expiring (no renewal, no retried grant), and if it fails the lock
// is expired again at once, so a failed Expire never leaves a lease that
// nobody times (docs/design.md#leases).
func TestExpireInFlightAcrossEpochs(t *testing.T) {
	h := newHarness(t)
	block := make(chan struct{})
	var unblock sync.Once
	t.Cleanup(func() { unblock.Do(func() { close(block) }) }) // runs before the lessor's Close
	h.mu.Lock()
	h.block = block
	h.mu.Unlock()
	h.l.Promote(h.sm, testTerm)
	tok := h.grant("a", 100)
	h.settle(1)
	h.clock.Advance(100 * time.Millisecond)
	h.expectExpire("a", tok) // proposed, not returned

	h.l.Demote()
	h.mu.Lock()
	h.term = testTerm + 1
	h.mu.Unlock()
	h.l.Promote(h.sm, testTerm+1)
	assert.True(t, h.l.Expiring("a", tok))
	require.ErrorIs(t, h.l.Renewable("a", tok), lessor.ErrExpired)
	require.ErrorIs(t, h.l.Regrant("a", tok), lessor.ErrExpired)

	h.mu.Lock()
	h.block = nil
	h.expErr = errors.New("proposal dropped")
	h.mu.Unlock()
	unblock.Do(func() { close(block) })
	h.expectExpire("a", tok) // re-armed in the new epoch and proposed again
}
