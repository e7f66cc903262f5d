package waitq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/waitq"
)

// errAtQuota is what the test's Admit refuses with.
var errAtQuota = errors.New("at quota")

// quotaReq is a waiting exclusive request of owner for key by principal,
// admitted while the principal has fewer than limit waiting.
func quotaReq(key, owner, principal string, limit int) waitq.Request {
	return waitq.Request{Key: key, Owner: owner, Wait: true, Principal: principal,
		Admit: func(waiting int) error {
			if waiting >= limit {
				return fmt.Errorf("%w: %s has %d waiting", errAtQuota, principal, waiting)
			}
			return nil
		}}
}

// TestPrincipalWaitingAdmit: a principal's waiting requests are counted
// over all keys; past what Admit allows its next waiter is refused with
// Admit's error while another principal still queues; a request served,
// one whose client left and a retry keep the count exact, and Close
// forgets it.
func TestPrincipalWaitingAdmit(t *testing.T) {
	q, tb := newQueue(t, 0)
	for _, k := range []string{"a", "b", "c"} {
		tb.set(k, heldBy("holder"))
	}
	out := make(chan entered, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	enterReq(t, q, context.Background(), quotaReq("a", "b1", "bob", 2), out)
	gone, leave := context.WithCancel(ctx)
	enterReq(t, q, gone, quotaReq("b", "b2", "bob", 2), out)
	require.Equal(t, 2, q.PrincipalWaiting("bob"))

	// Refused before it would wait: a context already ended changes nothing.
	ended, end := context.WithCancel(ctx)
	end()
	_, err := q.Enter(ended, quotaReq("c", "b3", "bob", 2))
	require.ErrorIs(t, err, errAtQuota, "bob's third waiter")
	assert.Equal(t, 2, q.PrincipalWaiting("bob"), "the refused request counts nothing")
	assert.Equal(t, 2, q.Waiting())

	enterReq(t, q, context.Background(), quotaReq("c", "a1", "alice", 2), out)
	assert.Equal(t, 1, q.PrincipalWaiting("alice"), "another principal still queues")

	// A turn that comes at once never waits, and never asks Admit.
	turn, err := q.Enter(ctx, quotaReq("free", "b4", "bob", 2))
	require.NoError(t, err)
	turn.Done()

	leave() // b2's client goes: bob has room again
	require.ErrorIs(t, recv(t, out).err, context.Canceled)
	assert.Equal(t, 1, q.PrincipalWaiting("bob"))
	enterReq(t, q, context.Background(), quotaReq("c", "b5", "bob", 2), out)
	assert.Equal(t, 2, q.PrincipalWaiting("bob"))

	tb.set("a", waitq.KeyState{}) // a's holder leaves: b1 is served
	q.Kick("a")
	e := recv(t, out)
	require.NoError(t, e.err)
	assert.Equal(t, "b1", e.name)
	assert.Equal(t, 1, q.PrincipalWaiting("bob"), "a served waiter no longer counts")
	e.turn.Done()

	q.Close()
	for range 2 {
		require.ErrorIs(t, recv(t, out).err, waitq.ErrClosed)
	}
	assert.Zero(t, q.PrincipalWaiting("bob"))
	assert.Zero(t, q.PrincipalWaiting("alice"))
}
