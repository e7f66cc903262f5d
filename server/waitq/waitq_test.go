package waitq_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/waitq"
)

// safety is the real-time net for receives; no assertion depends on it.
const safety = 10 * time.Second

// table is the lock-table view below the queue: key -> state.
type table struct {
	mu sync.Mutex
	m  map[string]waitq.KeyState
}

func (tb *table) State(key string) waitq.KeyState {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.m[key]
}

func (tb *table) set(key string, ks waitq.KeyState) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.m[key] = ks
}

// heldBy is the state of a key held exclusively by owner.
func heldBy(owner string) waitq.KeyState {
	return waitq.KeyState{Holders: []waitq.Holder{{Owner: owner}}}
}

// removingBy is the state of a key held exclusively by owner, whose removal
// (an Expire or ghost Release) is in flight.
func removingBy(owner string) waitq.KeyState {
	return waitq.KeyState{Holders: []waitq.Holder{{Owner: owner, Removing: true}}}
}

// excl is a request for an exclusive lock.
func excl(key, owner string, wait bool) waitq.Request {
	return waitq.Request{Key: key, Owner: owner, Wait: wait}
}

func newQueue(t *testing.T, maxWaiters int) (*waitq.Queue, *table) {
	tb := &table{m: map[string]waitq.KeyState{}}
	q, err := waitq.New(waitq.Config{State: tb.State, MaxWaiters: maxWaiters})
	require.NoError(t, err)
	q.Open()
	t.Cleanup(q.Close) // fails any waiter still queued, so no goroutine outlives the test
	return q, tb
}

type entered struct {
	name string
	turn *waitq.Turn
	err  error
}

// enter starts a waiting Enter of an exclusive lock and returns once it is queued.
func enter(t *testing.T, q *waitq.Queue, ctx context.Context, key, owner string, wait bool, out chan<- entered) {
	t.Helper()
	enterReq(t, q, ctx, excl(key, owner, wait), out)
}

// enterReq starts a waiting Enter of r and returns once it is queued.
func enterReq(t *testing.T, q *waitq.Queue, ctx context.Context, r waitq.Request, out chan<- entered) {
	t.Helper()
	before := q.Waiting()
	go func() {
		turn, err := q.Enter(ctx, r)
		out <- entered{r.Owner, turn, err}
	}()
	deadline := time.Now().Add(safety)
	for q.Waiting() == before {
		require.True(t, time.Now().Before(deadline), "waiter %s never queued", r.Owner)
		time.Sleep(time.Millisecond)
	}
}

func recv(t *testing.T, ch <-chan entered) entered {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(safety):
		t.Fatal("no waiter served")
		return entered{}
	}
}

func none(t *testing.T, ch <-chan entered) {
	t.Helper()
	select {
	case e := <-ch:
		t.Fatalf("unexpected result for %s: %v", e.name, e.err)
	default:
	}
}

func TestFreeKeyTurnAtOnce(t *testing.T) {
	q, _ := newQueue(t, 0)
	turn, err := q.Enter(context.Background(), excl("k", "a", false))
	require.NoError(t, err)
	assert.Equal(t, "k", turn.Key())
	assert.Equal(t, 1, q.Inflight())
	turn.Done()
	turn.Done() // idempotent
	assert.Equal(t, 0, q.Inflight())
}

func TestBusyKeyWithoutWait(t *testing.T) {
	tests := []struct {
		name  string
		state waitq.KeyState
		turn  bool // a grant for "other" in flight
	}{
		{name: "held_by_other", state: heldBy("other")},
		{name: "held_with_grant_in_flight", state: heldBy("other"), turn: true},
		{name: "removing_other", state: removingBy("other")},
		{name: "lock_delay", state: waitq.KeyState{Delayed: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, tb := newQueue(t, 0)
			if tc.turn {
				_, err := q.Enter(context.Background(), excl("k", "other", false))
				require.NoError(t, err)
			}
			tb.set("k", tc.state)
			_, err := q.Enter(context.Background(), excl("k", "me", false))
			require.ErrorIs(t, err, waitq.ErrHeld)
			assert.Equal(t, 0, q.Waiting())
		})
	}
}

func TestFIFOOnRelease(t *testing.T) {
	q, tb := newQueue(t, 0)
	tb.set("k", heldBy("h"))
	out := make(chan entered, 3)
	ctx := context.Background()
	for _, w := range []string{"w1", "w2", "w3"} {
		enter(t, q, ctx, "k", w, true, out)
	}
	assert.Equal(t, 3, q.Waiting())
	q.Kick("k") // nothing changed: still held
	none(t, out)

	for _, want := range []string{"w1", "w2", "w3"} {
		tb.set("k", waitq.KeyState{}) // the holder's Release applied
		q.Kick("k")
		got := recv(t, out)
		require.NoError(t, got.err)
		assert.Equal(t, want, got.name)
		tb.set("k", heldBy(want)) // its grant applied
		got.turn.Done()
		none(t, out)
	}
	assert.Equal(t, 0, q.Waiting())
}

func TestFailedGrantPassesTurnOn(t *testing.T) {
	q, _ := newQueue(t, 0)
	first, err := q.Enter(context.Background(), excl("k", "a", false))
	require.NoError(t, err)
	out := make(chan entered, 1)
	enter(t, q, context.Background(), "k", "b", true, out)
	first.Done() // the grant failed: the key is still free
	got := recv(t, out)
	require.NoError(t, got.err)
	assert.Equal(t, "b", got.name)
}

func TestCancelledWaiterIsSkipped(t *testing.T) {
	q, tb := newQueue(t, 0)
	tb.set("k", heldBy("h"))
	out := make(chan entered, 3)
	ctx, cancel := context.WithCancel(context.Background())
	enter(t, q, context.Background(), "k", "w1", true, out)
	enter(t, q, ctx, "k", "w2", true, out)
	enter(t, q, context.Background(), "k", "w3", true, out)
	cancel()
	got := recv(t, out)
	assert.Equal(t, "w2", got.name)
	require.ErrorIs(t, got.err, context.Canceled)
	assert.Equal(t, 2, q.Waiting())

	tb.set("k", waitq.KeyState{})
	q.Kick("k")
	got = recv(t, out)
	assert.Equal(t, "w1", got.name)
	got.turn.Done() // w1's grant failed
	got = recv(t, out)
	assert.Equal(t, "w3", got.name)
}

// TestCancelRacingTurn checks that a turn handed to a waiter whose context is
// cancelled at the same moment is never lost: the next waiter gets it.
func TestCancelRacingTurn(t *testing.T) {
	for range 200 {
		q, tb := newQueue(t, 0)
		tb.set("k", heldBy("h"))
		out := make(chan entered, 2)
		ctx, cancel := context.WithCancel(context.Background())
		enter(t, q, ctx, "k", "w1", true, out)
		enter(t, q, context.Background(), "k", "w2", true, out)
		tb.set("k", waitq.KeyState{})
		go cancel()
		q.Kick("k")
		first := recv(t, out)
		if first.name == "w2" {
			// w1 left before the kick, which served w2 directly.
			require.NoError(t, first.err)
			first.turn.Done()
			require.ErrorIs(t, recv(t, out).err, context.Canceled)
			require.Equal(t, 0, q.Inflight())
			continue
		}
		if first.name == "w1" && first.err == nil {
			first.turn.Done() // w1 won the race and gives up its grant
		} else {
			require.ErrorIs(t, first.err, context.Canceled)
		}
		second := recv(t, out)
		require.Equal(t, "w2", second.name)
		require.NoError(t, second.err)
		second.turn.Done()
		require.Equal(t, 0, q.Inflight())
	}
}

func TestCloseFailsWaiters(t *testing.T) {
	q, tb := newQueue(t, 0)
	stale, err := q.Enter(context.Background(), excl("free", "a", false))
	require.NoError(t, err)
	tb.set("k", heldBy("h"))
	out := make(chan entered, 2)
	enter(t, q, context.Background(), "k", "w1", true, out)
	enter(t, q, context.Background(), "k", "w2", true, out)
	q.Close()
	for range 2 {
		require.ErrorIs(t, recv(t, out).err, waitq.ErrClosed)
	}
	_, err = q.Enter(context.Background(), excl("x", "a", false))
	require.ErrorIs(t, err, waitq.ErrClosed)
	assert.Equal(t, 0, q.Waiting())
	assert.Equal(t, 0, q.Inflight())

	q.Open()
	turn, err := q.Enter(context.Background(), excl("free", "b", false))
	require.NoError(t, err)
	stale.Done() // from the old term: must not free "free"
	assert.Equal(t, 1, q.Inflight(), "b's grant is still in flight")
	out = make(chan entered, 1)
	enter(t, q, context.Background(), "free", "c", false, out) // waits (tentative) behind b's grant
	turn.Done()                                                // b's grant failed
	got := recv(t, out)
	require.NoError(t, got.err)
	got.turn.Done()
}

func TestWaiterLimit(t *testing.T) {
	q, tb := newQueue(t, 2)
	tb.set("k", heldBy("h"))
	out := make(chan entered, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	enter(t, q, ctx, "k", "w1", true, out)
	enter(t, q, ctx, "k", "w2", true, out)
	_, err := q.Enter(ctx, excl("k", "w3", true))
	require.ErrorIs(t, err, waitq.ErrFull)
	_, err = q.Enter(ctx, excl("other", "w3", true)) // the limit is per key
	require.NoError(t, err)
}

// TestTotalWaiterLimit: MaxWaitersTotal caps waiters over all keys
// (docs/design.md#limits-and-quotas), a retry of a request in flight still gets its place, and a
// waiter leaving frees a place.
func TestTotalWaiterLimit(t *testing.T) {
	tb := &table{m: map[string]waitq.KeyState{}}
	q, err := waitq.New(waitq.Config{State: tb.State, MaxWaiters: 10, MaxWaitersTotal: 2})
	require.NoError(t, err)
	q.Open()
	t.Cleanup(q.Close)
	for _, k := range []string{"a", "b", "c"} {
		tb.set(k, heldBy("h-"+k))
	}
	out := make(chan entered, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx1, leave1 := context.WithCancel(ctx)
	enter(t, q, ctx1, "a", "w1", true, out)
	enter(t, q, ctx, "b", "w2", true, out)
	_, err = q.Enter(ctx, excl("c", "w3", true))
	require.ErrorIs(t, err, waitq.ErrFull, "the third waiter over all keys is refused")

	leave1()
	require.ErrorIs(t, recv(t, out).err, context.Canceled)
	enter(t, q, ctx, "c", "w3", true, out) // the place w1 left is free again

	tb.set("a", removingBy("h-a"))
	enter(t, q, ctx, "a", "h-a", false, out) // a retry of the holder being removed keeps its place, full or not
	require.Equal(t, 3, q.Waiting())
}

func TestRetryWaitsForRemovalThenGoesFirst(t *testing.T) {
	q, tb := newQueue(t, 0)
	// x's grant applied after x's client left: a ghost Release is proposed.
	tb.set("k", removingBy("x"))
	out := make(chan entered, 2)
	enter(t, q, context.Background(), "k", "w1", true, out)
	enter(t, q, context.Background(), "k", "x", false, out) // x retries, without wait
	none(t, out)
	tb.set("k", waitq.KeyState{}) // the ghost Release applied
	q.Kick("k")
	got := recv(t, out)
	require.NoError(t, got.err)
	assert.Equal(t, "x", got.name, "the retry keeps the place of its first attempt")
}

func TestRetryOfGrantInFlight(t *testing.T) {
	q, tb := newQueue(t, 0)
	first, err := q.Enter(context.Background(), excl("k", "x", false))
	require.NoError(t, err)
	out := make(chan entered, 1)
	enter(t, q, context.Background(), "k", "x", false, out)
	tb.set("k", heldBy("x")) // the first attempt was granted
	first.Done()
	got := recv(t, out)
	require.NoError(t, got.err, "the retry proposes again and receives the same lock")
}

func TestHolderRetryDoesNotQueue(t *testing.T) {
	q, tb := newQueue(t, 0)
	tb.set("k", heldBy("x"))
	out := make(chan entered, 1)
	enter(t, q, context.Background(), "k", "w1", true, out)
	turn, err := q.Enter(context.Background(), excl("k", "x", false))
	require.NoError(t, err)
	turn.Done()
	none(t, out)
}

// TestManyKeysConcurrently runs waiting Acquires on many keys (spread over
// the queue's shards) from many goroutines, each key handed on from grant to
// grant by Kick, and checks that every waiter is served and nothing stays
// in flight or waiting. Run it with -race.
func TestManyKeysConcurrently(t *testing.T) {
	q, tb := newQueue(t, 0)
	const keys, perKey = 32, 8
	var wg sync.WaitGroup
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		for w := range perKey {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := fmt.Sprintf("w%d", w)
				ctx, cancel := context.WithTimeout(context.Background(), safety)
				defer cancel()
				turn, err := q.Enter(ctx, excl(key, owner, true))
				if !assert.NoError(t, err) {
					return
				}
				tb.set(key, heldBy(owner)) // the grant applied
				turn.Done()
				tb.set(key, waitq.KeyState{}) // its Release applied
				q.Kick(key)
			}()
		}
	}
	wg.Wait()
	assert.Equal(t, 0, q.Inflight())
	assert.Equal(t, 0, q.Waiting())
}
