package waitq_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/waitq"
)

// These tests cover requests without wait that find the key free in the
// table but busy in the queue (tentative waiters, see Enter): they are
// refused only once the table shows the key held by another owner (a
// refusal while the grant was only in flight is not linearizable: a fault
// run's checker caught one; docs/design.md#waiting-and-fairness).

func TestWithoutWaitRefusedOnlyWhenGrantApplies(t *testing.T) {
	q, tb := newQueue(t, 0)
	first, err := q.Enter(context.Background(), excl("k", "a", false))
	require.NoError(t, err)
	out := make(chan entered, 1)
	enter(t, q, context.Background(), "k", "b", false, out)
	none(t, out) // a's grant is only in flight: the table says free
	q.Kick("k")  // an unrelated kick while the table still says free
	none(t, out)
	tb.set("k", heldBy("a")) // a's grant applied
	first.Done()
	got := recv(t, out)
	require.ErrorIs(t, got.err, waitq.ErrHeld)
	assert.Equal(t, 0, q.Waiting())
}

func TestWithoutWaitGetsTurnWhenGrantFails(t *testing.T) {
	q, _ := newQueue(t, 0)
	first, err := q.Enter(context.Background(), excl("k", "a", false))
	require.NoError(t, err)
	out := make(chan entered, 1)
	enter(t, q, context.Background(), "k", "b", false, out)
	first.Done() // a's grant failed: the key is still free
	got := recv(t, out)
	require.NoError(t, got.err)
	assert.Equal(t, "b", got.name)
	got.turn.Done()
	assert.Equal(t, 0, q.Inflight())
}

func TestWithoutWaitKeepsFIFO(t *testing.T) {
	q, tb := newQueue(t, 0)
	first, err := q.Enter(context.Background(), excl("k", "a", false))
	require.NoError(t, err)
	out := make(chan entered, 2)
	enter(t, q, context.Background(), "k", "w", true, out)  // a waiter first
	enter(t, q, context.Background(), "k", "t", false, out) // then a request without wait
	first.Done()                                            // a's grant failed
	got := recv(t, out)
	require.NoError(t, got.err)
	require.Equal(t, "w", got.name, "the waiter queued first is served first")
	none(t, out)
	tb.set("k", heldBy("w")) // w's grant applied
	got.turn.Done()
	got = recv(t, out)
	assert.Equal(t, "t", got.name)
	require.ErrorIs(t, got.err, waitq.ErrHeld)
}

func TestWithoutWaitBehindQueueOnFreeKey(t *testing.T) {
	q, tb := newQueue(t, 0)
	tb.set("k", heldBy("h"))
	out := make(chan entered, 2)
	enter(t, q, context.Background(), "k", "w", true, out)
	tb.set("k", waitq.KeyState{}) // h's Release applied; its Kick has not run yet
	enter(t, q, context.Background(), "k", "t", false, out)
	none(t, out)
	q.Kick("k")
	got := recv(t, out)
	require.Equal(t, "w", got.name)
	tb.set("k", heldBy("w"))
	got.turn.Done()
	require.ErrorIs(t, recv(t, out).err, waitq.ErrHeld)
}

func TestWithoutWaitLeavesOnCancel(t *testing.T) {
	q, _ := newQueue(t, 0)
	first, err := q.Enter(context.Background(), excl("k", "a", false))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan entered, 1)
	enter(t, q, ctx, "k", "b", false, out)
	cancel()
	require.ErrorIs(t, recv(t, out).err, context.Canceled)
	assert.Equal(t, 0, q.Waiting())
	first.Done()
	assert.Equal(t, 0, q.Inflight())
}

func TestWithoutWaitCountsTowardLimit(t *testing.T) {
	q, _ := newQueue(t, 1)
	first, err := q.Enter(context.Background(), excl("k", "a", false))
	require.NoError(t, err)
	out := make(chan entered, 1)
	enter(t, q, context.Background(), "k", "b", false, out)
	_, err = q.Enter(context.Background(), excl("k", "c", false))
	require.ErrorIs(t, err, waitq.ErrFull, "a tentative waiter takes a place like any waiter")
	first.Done()
	got := recv(t, out)
	require.NoError(t, got.err)
	got.turn.Done()
}

func TestHandoffNeverToTentative(t *testing.T) {
	q, tb := newQueue(t, 0)
	first, err := q.Enter(context.Background(), excl("k", "a", false))
	require.NoError(t, err)
	out := make(chan entered, 2)
	enter(t, q, context.Background(), "k", "t", false, out)
	enter(t, q, context.Background(), "k", "w", true, out)
	// a's grant applied: t is refused when the turn ends, and a's Release
	// then hands off to w, never to t.
	tb.set("k", heldBy("a"))
	first.Done()
	require.ErrorIs(t, recv(t, out).err, waitq.ErrHeld)
	require.True(t, q.Handoff("k"), "the waiter behind gets the pipelined turn")
	got := recv(t, out)
	require.Equal(t, "w", got.name)
	require.True(t, got.turn.Pipelined())
	got.turn.Done()
}
