package lessor_test

import (
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
	t        *testing.T
	clock    *fakeclock.Clock
	sm       *core.StateMachine
	l        *lessor.Lessor
	applyMu  sync.Mutex
	index    uint64
	mu       sync.Mutex
	confirm  func(context.Context) error
	term     uint64        // the term Confirm returns; 0 means testTerm
	block    chan struct{} // when set, Expire waits for it to close (in flight)
	expErr   error
	expires  chan expireCall
	confirms chan struct{}
}

func newHarness(t *testing.T) *harness {
	h := &harness{
		t:        t,
		clock:    fakeclock.New(),
		sm:       core.NewStateMachine(),
		expires:  make(chan expireCall, 100),
		confirms: make(chan struct{}, 100),
	}
	l, err := lessor.New(lessor.Config{
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
		Expire: func(_ context.Context, key string, token uint64) error {
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
				h.apply(core.Expire(key, token))
				h.l.Removed(key, token)
			}
			if block == nil {
				h.expires <- expireCall{key, token}
			}
			return err
		},
	})
	require.NoError(t, err)
	h.l = l
	t.Cleanup(func() { _ = l.Close() })
	return h
}

func (h *harness) apply(cmd core.Command) core.Result {
	h.applyMu.Lock()
	defer h.applyMu.Unlock()
	h.index++
	res, err := h.sm.Apply(h.index, cmd)
	require.NoError(h.t, err)
	return res
}

// grant applies a grant and tells the lessor, as the server's OnApply does.
func (h *harness) grant(key string, leaseMS int64) uint64 {
	res := h.apply(core.Grant(key, leaseMS, "owner-"+key))
	require.Equal(h.t, core.OutcomeGranted, res.Outcome)
	h.l.Granted(key, res.Token, res.LeaseMS)
	return res.Token
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
	_, err := h.l.Renew(context.Background(), "a", tok)
	require.ErrorIs(t, err, lessor.ErrExpired)

	h.mu.Lock()
	h.expErr = nil
	h.mu.Unlock()
	h.clock.Advance(500 * time.Millisecond)
	h.expectExpire("a", tok)
	_, held := h.sm.Get("a")
	assert.False(t, held)
}

func TestRenewExtendsFromConfirmation(t *testing.T) {
	h := newHarness(t)
	tok := h.grant("a", 1000)
	h.l.Promote(h.sm, testTerm)
	h.settle(1)
	h.clock.Advance(600 * time.Millisecond)
	// Time passes during the quorum round: the deadline is measured after it.
	h.mu.Lock()
	h.confirm = func(context.Context) error { h.clock.Advance(50 * time.Millisecond); return nil }
	h.mu.Unlock()
	lease, err := h.l.Renew(context.Background(), "a", tok)
	require.NoError(t, err)
	assert.Equal(t, int64(1000), lease)
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
		_, err := h.l.Renew(context.Background(), "a", tok)
		require.ErrorIs(t, err, lessor.ErrExpired)
	})
	t.Run("deadline_passes_during_confirm", func(t *testing.T) {
		h := newHarness(t)
		tok := h.grant("a", 100)
		h.l.Promote(h.sm, testTerm)
		h.settle(1)
		h.mu.Lock()
		h.expErr = errors.New("hold")
		h.confirm = func(context.Context) error { h.clock.Advance(100 * time.Millisecond); return nil }
		h.mu.Unlock()
		_, err := h.l.Renew(context.Background(), "a", tok)
		require.ErrorIs(t, err, lessor.ErrExpired)
	})
	t.Run("wrong_token", func(t *testing.T) {
		h := newHarness(t)
		tok := h.grant("a", 1000)
		h.l.Promote(h.sm, testTerm)
		_, err := h.l.Renew(context.Background(), "a", tok+1)
		require.ErrorIs(t, err, lessor.ErrNotHeld)
		_, err = h.l.Renew(context.Background(), "b", tok)
		require.ErrorIs(t, err, lessor.ErrNotHeld)
	})
	t.Run("not_primary", func(t *testing.T) {
		h := newHarness(t)
		tok := h.grant("a", 1000)
		_, err := h.l.Renew(context.Background(), "a", tok)
		require.ErrorIs(t, err, lessor.ErrNotPrimary)
	})
	t.Run("confirm_fails", func(t *testing.T) {
		h := newHarness(t)
		tok := h.grant("a", 1000)
		h.l.Promote(h.sm, testTerm)
		h.clock.Advance(400 * time.Millisecond)
		h.mu.Lock()
		h.confirm = func(context.Context) error { return &core.NotLeaderError{} }
		h.mu.Unlock()
		_, err := h.l.Renew(context.Background(), "a", tok)
		require.ErrorIs(t, err, core.ErrNotLeader)
		rem, _ := h.l.Remaining("a", tok)
		assert.Equal(t, 600*time.Millisecond, rem, "a failed renewal leaves the deadline alone")
	})
	t.Run("demoted_during_confirm", func(t *testing.T) {
		h := newHarness(t)
		tok := h.grant("a", 1000)
		h.l.Promote(h.sm, testTerm)
		h.mu.Lock()
		h.confirm = func(context.Context) error { h.l.Demote(); h.l.Promote(h.sm, testTerm); return nil }
		h.mu.Unlock()
		_, err := h.l.Renew(context.Background(), "a", tok)
		require.ErrorIs(t, err, lessor.ErrNotPrimary, "a renewal confirmed in an older term is refused")
	})
}

func TestPromoteResetsEveryDeadline(t *testing.T) {
	h := newHarness(t)
	ta := h.grant("a", 1000)
	tb := h.grant("b", 5000)
	h.clock.Advance(time.Hour) // time passing on a follower ends nothing
	h.l.Promote(h.sm, testTerm)
	ra, _ := h.l.Remaining("a", ta)
	rb, _ := h.l.Remaining("b", tb)
	assert.Equal(t, time.Second, ra)
	assert.Equal(t, 5*time.Second, rb)
	assert.Equal(t, 2, h.l.Len())
}

func TestDemoteStopsTimers(t *testing.T) {
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
	assert.Equal(t, 0, h.l.Len())
	_, ok := h.l.Remaining("a", tok)
	assert.False(t, ok)
	_, err := h.l.Renew(context.Background(), "a", tok)
	require.ErrorIs(t, err, lessor.ErrNotPrimary)
	// Grants applied on a follower are not tracked.
	h.grant("b", 10)
	assert.Equal(t, 0, h.l.Len())
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

func TestRegrantRestartsDeadline(t *testing.T) {
	h := newHarness(t)
	h.l.Promote(h.sm, testTerm)
	tok := h.grant("a", 1000)
	h.clock.Advance(400 * time.Millisecond)
	res := h.apply(core.Grant("a", 1000, "owner-a")) // the same owner retries
	require.Equal(t, tok, res.Token)
	require.False(t, res.Created)
	h.l.Granted("a", res.Token, res.LeaseMS)
	rem, _ := h.l.Remaining("a", tok)
	assert.Equal(t, 600*time.Millisecond, rem, "the apply alone does not decide for the retry")
	require.NoError(t, h.l.Regrant("a", tok, res.LeaseMS))
	rem, _ = h.l.Remaining("a", tok)
	assert.Equal(t, time.Second, rem, "the retry's lease is measured from now")
}

func TestRegrantRefused(t *testing.T) {
	t.Run("deadline_passed", func(t *testing.T) {
		h := newHarness(t)
		h.l.Promote(h.sm, testTerm)
		tok := h.grant("a", 1000)
		h.clock.Advance(time.Second)
		require.ErrorIs(t, h.l.Regrant("a", tok, 1000), lessor.ErrExpired)
	})
	t.Run("other_token", func(t *testing.T) {
		h := newHarness(t)
		h.l.Promote(h.sm, testTerm)
		tok := h.grant("a", 1000)
		require.ErrorIs(t, h.l.Regrant("a", tok+1, 1000), lessor.ErrNotHeld)
	})
	t.Run("not_primary", func(t *testing.T) {
		h := newHarness(t)
		tok := h.grant("a", 1000)
		require.ErrorIs(t, h.l.Regrant("a", tok, 1000), lessor.ErrNotPrimary)
	})
}

// TestStaleRoundProposesNothing: a round whose epoch ended while it waited
// for its leadership confirmation proposes nothing (issue 14, race 3).
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
						h.l.Demote()
						h.l.Promote(h.sm, testTerm)
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

func TestExpiringLeaseIsNotRevivedByRetriedGrant(t *testing.T) {
	h := newHarness(t)
	h.mu.Lock()
	h.expErr = errors.New("hold")
	h.mu.Unlock()
	h.l.Promote(h.sm, testTerm)
	tok := h.grant("a", 100)
	h.settle(1)
	h.clock.Advance(100 * time.Millisecond)
	h.expectExpire("a", tok)
	h.l.Granted("a", tok, 100)
	assert.True(t, h.l.Expiring("a", tok))
	require.ErrorIs(t, h.l.Regrant("a", tok, 100), lessor.ErrExpired)
	_, err := h.l.Renew(context.Background(), "a", tok)
	require.ErrorIs(t, err, lessor.ErrExpired)
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

// A deposed leader (paused past a lease while its successor granted the key)
// holds a stale table; its refusal must wait for the quorum confirmation, which
// fails, so the client hears "not leader" and retries at the real leader.
// Found by the fault-injection suite (pause-leader-lease).
func TestRenewRefusalWaitsForConfirm(t *testing.T) {
	deposed := errors.New("deposed")
	for _, tc := range []struct {
		name  string
		token func(granted uint64) uint64
	}{
		{"unknown_token", func(g uint64) uint64 { return g + 1 }},
		{"past_deadline", func(g uint64) uint64 { return g }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.mu.Lock()
			h.expErr = errors.New("hold")
			h.confirm = func(context.Context) error { return deposed }
			h.mu.Unlock()
			tok := h.grant("a", 100)
			h.l.Promote(h.sm, testTerm)
			h.settle(1)
			h.clock.Advance(100 * time.Millisecond)
			_, err := h.l.Renew(context.Background(), "a", tc.token(tok))
			assert.ErrorIs(t, err, deposed)
			assert.NotErrorIs(t, err, lessor.ErrNotHeld)
			assert.NotErrorIs(t, err, lessor.ErrExpired)
		})
	}
}

// TestExpireInFlightAcrossEpochs: an Expire proposed in one epoch may still
// commit after a demote and re-promote; until it returns, the new epoch keeps
// that lock expiring (no renewal, no retried grant), and if it fails the lock
// is expired again at once (issue 14, race 3).
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
	_, err := h.l.Renew(context.Background(), "a", tok)
	require.ErrorIs(t, err, lessor.ErrExpired)
	require.ErrorIs(t, h.l.Regrant("a", tok, 100), lessor.ErrExpired)

	h.mu.Lock()
	h.block = nil
	h.expErr = errors.New("proposal dropped")
	h.mu.Unlock()
	unblock.Do(func() { close(block) })
	h.expectExpire("a", tok) // re-armed in the new epoch and proposed again
}
