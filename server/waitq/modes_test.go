package waitq_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/waitq"
)

// These tests cover shared locks and semaphores: the gate counts
// holders and grants in flight per mode and limit, serves waiters first in
// first out across modes (writer preference), hands several shared turns out
// at once, a semaphore's free slots one waiter each, and refuses a limit
// that differs from the key's.

// shared is a request for a shared lock.
func shared(key, owner string, wait bool) waitq.Request {
	return waitq.Request{Key: key, Owner: owner, Mode: core.ModeShared, Wait: wait}
}

// slot is a request for a slot of a semaphore of limit holders.
func slot(key, owner string, limit uint32, wait bool) waitq.Request {
	return waitq.Request{Key: key, Owner: owner, Limit: limit, Wait: wait}
}

// heldShared is the state of a key held in the shared mode by owners.
func heldShared(owners ...string) waitq.KeyState {
	ks := waitq.KeyState{Mode: core.ModeShared}
	for _, o := range owners {
		ks.Holders = append(ks.Holders, waitq.Holder{Owner: o})
	}
	return ks
}

// heldSemaphore is the state of a semaphore of limit holders held by owners.
func heldSemaphore(limit uint32, owners ...string) waitq.KeyState {
	ks := waitq.KeyState{Limit: limit}
	for _, o := range owners {
		ks.Holders = append(ks.Holders, waitq.Holder{Owner: o})
	}
	return ks
}

// mustTurn enters r and requires a turn at once.
func mustTurn(t *testing.T, q *waitq.Queue, r waitq.Request) *waitq.Turn {
	t.Helper()
	turn, err := q.Enter(context.Background(), r)
	require.NoError(t, err, "%s", r.Owner)
	return turn
}

// recvAll receives n results and returns them by owner.
func recvAll(t *testing.T, ch <-chan entered, n int) map[string]entered {
	t.Helper()
	got := map[string]entered{}
	for range n {
		e := recv(t, ch)
		got[e.name] = e
	}
	return got
}

func TestSharedTurnsTogether(t *testing.T) {
	q, _ := newQueue(t, 0)
	r1 := mustTurn(t, q, shared("k", "r1", true))
	r2 := mustTurn(t, q, shared("k", "r2", false)) // beside a shared grant in flight
	assert.Equal(t, 2, q.Inflight())
	r1.Done()
	r2.Done()
}

func TestWriterPreference(t *testing.T) {
	q, tb := newQueue(t, 0)
	tb.set("k", heldShared("r1", "r2"))
	out := make(chan entered, 4)
	enterReq(t, q, context.Background(), excl("k", "w", true), out)
	// r3 would fit beside the shared holders, but w waits ahead of it.
	enterReq(t, q, context.Background(), shared("k", "r3", true), out)
	none(t, out)
	tb.set("k", heldShared("r2")) // r1's Release applied
	q.Kick("k")
	none(t, out) // r2 still holds: w cannot have it, and r3 stays behind w
	tb.set("k", waitq.KeyState{})
	q.Kick("k")
	got := recv(t, out)
	require.NoError(t, got.err)
	assert.Equal(t, "w", got.name)
	none(t, out) // w's grant is in flight: r3 does not fit beside it
	tb.set("k", heldBy("w"))
	got.turn.Done()
	none(t, out)
	tb.set("k", waitq.KeyState{}) // w's Release applied
	q.Kick("k")
	got = recv(t, out)
	require.NoError(t, got.err)
	assert.Equal(t, "r3", got.name)
	got.turn.Done()
}

func TestSharedBatchAtHead(t *testing.T) {
	q, tb := newQueue(t, 0)
	tb.set("k", heldBy("h"))
	out := make(chan entered, 5)
	for _, r := range []waitq.Request{
		shared("k", "r1", true), shared("k", "r2", true), shared("k", "r3", true),
		excl("k", "w", true), shared("k", "r4", true),
	} {
		enterReq(t, q, context.Background(), r, out)
	}
	tb.set("k", waitq.KeyState{}) // h's Release applied
	q.Kick("k")
	got := recvAll(t, out, 3)
	for _, name := range []string{"r1", "r2", "r3"} {
		require.NoError(t, got[name].err, name)
	}
	assert.Equal(t, 3, q.Inflight())
	assert.Equal(t, 2, q.Waiting())
	none(t, out) // w stops the batch; r4 stays behind it
	tb.set("k", heldShared("r1", "r2", "r3"))
	for _, e := range got {
		e.turn.Done()
	}
	none(t, out)
	assert.Equal(t, 2, q.Waiting())
	q.Close()
	for range 2 {
		require.ErrorIs(t, recv(t, out).err, waitq.ErrClosed)
	}
}

func TestSemaphoreSlots(t *testing.T) {
	q, tb := newQueue(t, 0)
	a := mustTurn(t, q, slot("k", "a", 2, true))
	b := mustTurn(t, q, slot("k", "b", 2, true))
	out := make(chan entered, 2)
	enterReq(t, q, context.Background(), slot("k", "c", 2, true), out)
	enterReq(t, q, context.Background(), slot("k", "d", 2, true), out)
	tb.set("k", heldSemaphore(2, "a", "b"))
	a.Done()
	b.Done()
	none(t, out)                       // two holders: full
	tb.set("k", heldSemaphore(2, "b")) // a's Release applied
	q.Kick("k")
	got := recv(t, out)
	require.NoError(t, got.err)
	assert.Equal(t, "c", got.name) // one free slot, to the next waiter only
	none(t, out)
	tb.set("k", heldSemaphore(2, "b", "c"))
	got.turn.Done()
	none(t, out)
	tb.set("k", heldSemaphore(2, "c")) // b's Release applied
	q.Kick("k")
	got = recv(t, out)
	require.NoError(t, got.err)
	assert.Equal(t, "d", got.name)
	got.turn.Done()
}

func TestRemovingHolderKeepsItsSlot(t *testing.T) {
	q, tb := newQueue(t, 0)
	ks := heldSemaphore(2, "a", "b")
	ks.Holders[0].Removing = true // a's Expire is in flight
	tb.set("k", ks)
	out := make(chan entered, 1)
	enterReq(t, q, context.Background(), slot("k", "c", 2, true), out)
	q.Kick("k")
	none(t, out) // a still counts until its Expire applies
	tb.set("k", heldSemaphore(2, "b"))
	q.Kick("k")
	got := recv(t, out)
	require.NoError(t, got.err)
	got.turn.Done()
}

func TestLimitMismatch(t *testing.T) {
	tests := []struct {
		name  string
		state waitq.KeyState
		setup func(t *testing.T, q *waitq.Queue) // grants in flight or waiters
		req   waitq.Request
		limit uint32 // the key's, carried by the error
	}{
		{name: "semaphore_holders", state: heldSemaphore(2, "a"), req: slot("k", "x", 3, true), limit: 2},
		{name: "lock_holder_semaphore_request", state: heldBy("a"), req: slot("k", "x", 2, false), limit: 0},
		{name: "semaphore_holder_lock_request", state: heldSemaphore(2, "a"), req: shared("k", "x", true), limit: 2},
		{name: "grant_in_flight_only", setup: func(t *testing.T, q *waitq.Queue) {
			mustTurn(t, q, slot("k", "a", 2, true))
		}, req: excl("k", "x", true), limit: 2},
		{name: "waiters_only", state: waitq.KeyState{Delayed: true}, setup: func(t *testing.T, q *waitq.Queue) {
			// Under a lock-delay the key has no holder and no grant in
			// flight, only a waiter: its limit is the key's.
			enterReq(t, q, context.Background(), slot("k", "c", 1, true), make(chan entered, 1))
		}, req: slot("k", "x", 3, false), limit: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, tb := newQueue(t, 0)
			tb.set("k", tc.state)
			if tc.setup != nil {
				tc.setup(t, q)
			}
			waiting := q.Waiting()
			_, err := q.Enter(context.Background(), tc.req)
			require.ErrorIs(t, err, waitq.ErrLimitMismatch)
			var lm *waitq.LimitMismatchError
			require.ErrorAs(t, err, &lm)
			assert.Equal(t, tc.limit, lm.Limit)
			assert.Contains(t, err.Error(), fmt.Sprintf("limit %d", tc.limit))
			assert.Equal(t, waiting, q.Waiting())
		})
	}
}

func TestModeMismatchWaits(t *testing.T) {
	q, tb := newQueue(t, 0)
	tb.set("k", heldBy("h"))
	out := make(chan entered, 1)
	enterReq(t, q, context.Background(), shared("k", "r", true), out)
	none(t, out)
	tb.set("k", waitq.KeyState{})
	q.Kick("k")
	got := recv(t, out)
	require.NoError(t, got.err)
	got.turn.Done()
}

func TestWithoutWaitModes(t *testing.T) {
	tests := []struct {
		name   string
		state  waitq.KeyState
		flight *waitq.Request // a grant in flight before the request
		req    waitq.Request
		refuse bool // refused at once; else a tentative waiter
	}{
		{name: "shared_on_exclusive_holder", state: heldBy("h"), req: shared("k", "r", false), refuse: true},
		{name: "exclusive_on_shared_holders", state: heldShared("r1"), req: excl("k", "w", false), refuse: true},
		{name: "full_semaphore", state: heldSemaphore(2, "a", "b"), req: slot("k", "c", 2, false), refuse: true},
		{name: "shared_beside_shared_and_exclusive_in_flight", state: heldShared("r1"),
			flight: ptr(excl("k", "w", true)), req: shared("k", "r2", false)},
		{name: "semaphore_slot_taken_by_grant_in_flight", state: heldSemaphore(2, "a"),
			flight: ptr(slot("k", "b", 2, true)), req: slot("k", "c", 2, false)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, tb := newQueue(t, 0)
			if tc.flight != nil {
				tb.set("k", waitq.KeyState{})
				mustTurn(t, q, *tc.flight)
			}
			tb.set("k", tc.state)
			if tc.refuse {
				_, err := q.Enter(context.Background(), tc.req)
				require.ErrorIs(t, err, waitq.ErrHeld)
				return
			}
			out := make(chan entered, 1)
			enterReq(t, q, context.Background(), tc.req, out)
			none(t, out)
		})
	}
}

func TestWithoutWaitBehindWaitingWriterFailsAtOnce(t *testing.T) {
	q, tb := newQueue(t, 0)
	tb.set("k", heldShared("r1"))
	out := make(chan entered, 2)
	enterReq(t, q, context.Background(), excl("k", "w", true), out) // a writer waits for r1
	none(t, out)
	// A reader without wait would fit beside r1, but the writer is ahead and
	// may wait a whole lease: it is refused now, with no claim on the table.
	_, err := q.Enter(context.Background(), shared("k", "r2", false))
	require.ErrorIs(t, err, waitq.ErrQueued)
	require.NotErrorIs(t, err, waitq.ErrHeld)
	assert.Equal(t, 1, q.Waiting(), "only the writer waits")
	// With wait, the reader queues behind the writer (writer preference).
	enterReq(t, q, context.Background(), shared("k", "r3", true), out)
	none(t, out)
	assert.Equal(t, 2, q.Waiting())
	q.Close()
	for range 2 {
		require.ErrorIs(t, recv(t, out).err, waitq.ErrClosed)
	}
}

// ptr returns a pointer to a copy of r.
func ptr(r waitq.Request) *waitq.Request { return &r }

func TestTentativeSharedRefusedWhenWriterApplies(t *testing.T) {
	q, tb := newQueue(t, 0)
	w := mustTurn(t, q, excl("k", "w", true))
	out := make(chan entered, 1)
	enterReq(t, q, context.Background(), shared("k", "r", false), out)
	none(t, out) // w's grant is only in flight: the table says free
	tb.set("k", heldBy("w"))
	w.Done()
	require.ErrorIs(t, recv(t, out).err, waitq.ErrHeld)
	assert.Equal(t, 0, q.Waiting())
}

func TestTentativeSharedServedBesideReaders(t *testing.T) {
	q, _ := newQueue(t, 0)
	w := mustTurn(t, q, excl("k", "w", true))
	out := make(chan entered, 1)
	enterReq(t, q, context.Background(), shared("k", "r", false), out)
	w.Done() // w's grant failed; the key is still free
	got := recv(t, out)
	require.NoError(t, got.err)
	got.turn.Done()
}

func TestTentativeSemaphoreRefusedWhenFull(t *testing.T) {
	q, tb := newQueue(t, 0)
	tb.set("k", heldSemaphore(2, "a"))
	b := mustTurn(t, q, slot("k", "b", 2, true))
	out := make(chan entered, 1)
	enterReq(t, q, context.Background(), slot("k", "c", 2, false), out)
	none(t, out)
	tb.set("k", heldSemaphore(2, "a", "b")) // b's grant applied: full
	b.Done()
	require.ErrorIs(t, recv(t, out).err, waitq.ErrHeld)
}

func TestSharedRetryBesideGrantsInFlight(t *testing.T) {
	q, tb := newQueue(t, 0)
	tb.set("k", heldShared("r1"))
	r2 := mustTurn(t, q, shared("k", "r2", true))
	out := make(chan entered, 1)
	enterReq(t, q, context.Background(), excl("k", "w", true), out)
	// r1 retries its Acquire: it holds the key, so its grant returns that
	// holder and takes no slot; it must not queue behind w, which waits
	// for r1 to release.
	turn := mustTurn(t, q, shared("k", "r1", true))
	turn.Done()
	r2.Done()
	none(t, out)
}

func TestCapsCountEveryMode(t *testing.T) {
	q, _ := newQueue(t, 2)
	mustTurn(t, q, excl("k", "h", true)) // its grant is in flight: the table says free
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan entered, 3)
	enterReq(t, q, ctx, shared("k", "r1", true), out)
	enterReq(t, q, ctx, shared("k", "r2", false), out) // tentative: counts too
	_, err := q.Enter(ctx, excl("k", "w", true))
	require.ErrorIs(t, err, waitq.ErrFull)
	cancel()
	recvAll(t, out, 2)
	assert.Equal(t, 0, q.Waiting())
}

func TestHandoffOnlyForExclusiveLocks(t *testing.T) {
	tests := []struct {
		name  string
		state waitq.KeyState
		head  waitq.Request
	}{
		{name: "shared_holders", state: heldShared("r1"), head: excl("k", "w", true)},
		{name: "semaphore", state: heldSemaphore(1, "a"), head: slot("k", "b", 1, true)},
		{name: "shared_head_on_exclusive_holder", state: heldBy("h"), head: shared("k", "r", true)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, tb := newQueue(t, 0)
			tb.set("k", tc.state)
			out := make(chan entered, 1)
			enterReq(t, q, context.Background(), tc.head, out)
			assert.False(t, q.Handoff("k"))
			none(t, out)
		})
	}
}

func TestRemovingHolderWithLockDelayBlocksFreeSlots(t *testing.T) {
	tests := []struct {
		name   string
		delay  bool // the holder being removed asked for a lock-delay
		served bool
	}{
		{name: "with_lock_delay", delay: true},
		{name: "without_lock_delay", served: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, tb := newQueue(t, 0)
			ks := heldSemaphore(2, "a")
			ks.Holders[0].Removing, ks.Holders[0].LockDelay = true, tc.delay
			tb.set("k", ks)
			out := make(chan entered, 1)
			go func() {
				turn, err := q.Enter(context.Background(), slot("k", "b", 2, true))
				out <- entered{"b", turn, err}
			}()
			if tc.served {
				got := recv(t, out) // one slot is free beside a
				require.NoError(t, got.err)
				got.turn.Done()
				return
			}
			// a's Expire may apply first and start its lock-delay on a free
			// key: b's grant must not be proposed before a is gone.
			for q.Waiting() == 0 {
				runtime.Gosched()
			}
			none(t, out)
			tb.set("k", waitq.KeyState{Delayed: true}) // a's Expire applied
			q.Kick("k")
			none(t, out)
			tb.set("k", waitq.KeyState{}) // the delay has passed
			q.Kick("k")
			got := recv(t, out)
			require.NoError(t, got.err)
			got.turn.Done()
		})
	}
}
