package waitq_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/waitq"
)

func TestHandoffGivesHeadAPipelinedTurn(t *testing.T) {
	q, tb := newQueue(t, 0)
	tb.set("k", heldBy("h"))
	out := make(chan entered, 2)
	enter(t, q, context.Background(), "k", "w1", true, out)
	enter(t, q, context.Background(), "k", "w2", true, out)

	require.True(t, q.Handoff("k")) // h's Release is being proposed
	got := recv(t, out)
	require.NoError(t, got.err)
	assert.Equal(t, "w1", got.name)
	assert.True(t, got.turn.Pipelined())
	assert.False(t, q.Handoff("k"), "a grant is in flight")
	tb.set("k", waitq.KeyState{}) // the Release applied; w1's Grant has not
	q.Kick("k")
	none(t, out) // w2 waits for w1's Grant to resolve
	tb.set("k", heldBy("w1"))
	got.turn.Done()
	none(t, out)
	assert.Equal(t, 1, q.Waiting())
}

func TestHandoffRefused(t *testing.T) {
	tests := []struct {
		name   string
		state  waitq.KeyState
		waiter bool
	}{
		{name: "no_waiter", state: heldBy("h")},
		{name: "key_free", state: waitq.KeyState{}, waiter: true},
		{name: "holder_being_removed", state: removingBy("h"), waiter: true},
		{name: "head_is_the_holder", state: heldBy("w1"), waiter: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, tb := newQueue(t, 0)
			out := make(chan entered, 1)
			if tc.waiter {
				tb.set("k", heldBy("h"))
				enter(t, q, context.Background(), "k", "w1", true, out)
			}
			tb.set("k", tc.state)
			assert.False(t, q.Handoff("k"))
			none(t, out)
		})
	}
}

func TestRequeueKeepsTheHead(t *testing.T) {
	q, tb := newQueue(t, 0)
	tb.set("k", heldBy("h"))
	out := make(chan entered, 2)
	enter(t, q, context.Background(), "k", "w1", true, out)
	enter(t, q, context.Background(), "k", "w2", true, out)
	require.True(t, q.Handoff("k"))
	got := recv(t, out)
	require.Equal(t, "w1", got.name)

	got.turn.Requeue() // w1's Grant was rejected: h still holds k
	got.turn.Done()    // no effect after Requeue
	assert.Equal(t, 2, q.Waiting())
	assert.Equal(t, 0, q.Inflight())
	none(t, out)

	tb.set("k", waitq.KeyState{}) // h's Release applied
	q.Kick("k")
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	again, err := got.turn.Wait(ctx)
	require.NoError(t, err)
	assert.False(t, again.Pipelined())
	none(t, out) // w2 still behind w1
	assert.Equal(t, 1, q.Waiting())
}

func TestRequeuedWaiterLeaves(t *testing.T) {
	q, tb := newQueue(t, 0)
	tb.set("k", heldBy("h"))
	out := make(chan entered, 2)
	enter(t, q, context.Background(), "k", "w1", true, out)
	enter(t, q, context.Background(), "k", "w2", true, out)
	require.True(t, q.Handoff("k"))
	got := recv(t, out)
	got.turn.Requeue()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := got.turn.Wait(ctx)
	require.ErrorIs(t, err, context.Canceled)
	tb.set("k", waitq.KeyState{})
	q.Kick("k")
	next := recv(t, out)
	require.NoError(t, next.err)
	assert.Equal(t, "w2", next.name)
}

func TestRequeueAfterClose(t *testing.T) {
	q, tb := newQueue(t, 0)
	tb.set("k", heldBy("h"))
	out := make(chan entered, 1)
	enter(t, q, context.Background(), "k", "w1", true, out)
	require.True(t, q.Handoff("k"))
	got := recv(t, out)
	q.Close() // demoted while the Grant was in flight
	q.Open()
	got.turn.Requeue()
	_, err := got.turn.Wait(context.Background())
	require.ErrorIs(t, err, waitq.ErrClosed)
	assert.Equal(t, 0, q.Waiting())
}

func TestWaitWithoutRequeue(t *testing.T) {
	q, _ := newQueue(t, 0)
	turn, err := q.Enter(context.Background(), excl("k", "a", false))
	require.NoError(t, err)
	_, err = turn.Wait(context.Background())
	require.ErrorIs(t, err, waitq.ErrNotRequeued)
}
