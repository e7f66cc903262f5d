package e2e_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
)

func acquireAsync(ctx context.Context, lock ticketv1connect.LockServiceClient, name string, req *ticketv1.AcquireRequest, out chan<- acquired) {
	go func() {
		res, err := lock.Acquire(ctx, req)
		out <- acquired{name: name, res: res, err: err, at: time.Now()}
	}()
}

// TestWaitersFIFO queues three waiters on a held key (the first through a
// follower), lets the second give up, and checks that the others are granted
// in arrival order as the lock is released, and that a waiter is granted when
// a holder's lease expires, never before it.
func TestWaitersFIFO(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		c := start(t, backend)
		ctx := ctxT(t)
		l := c.Leader(t)
		lead := c.Lock(l)

		h, err := lead.Acquire(ctx, &ticketv1.AcquireRequest{Key: "fifo", LeaseMs: 60_000, Owner: "h"})
		require.NoError(t, err)
		out := make(chan acquired, 3)
		w2ctx, cancelW2 := context.WithCancel(ctx)
		acquireAsync(ctx, c.Lock(follower(t, c)), "w1", &ticketv1.AcquireRequest{Key: "fifo", LeaseMs: 60_000, Owner: "w1", Wait: true}, out)
		waitWaiters(t, c, l, 1)
		acquireAsync(w2ctx, lead, "w2", &ticketv1.AcquireRequest{Key: "fifo", LeaseMs: 60_000, Owner: "w2", Wait: true}, out)
		waitWaiters(t, c, l, 2)
		acquireAsync(ctx, lead, "w3", &ticketv1.AcquireRequest{Key: "fifo", LeaseMs: 60_000, Owner: "w3", Wait: true}, out)
		waitWaiters(t, c, l, 3)

		cancelW2()
		a := recv(t, out)
		assert.Equal(t, "w2", a.name)
		requireCode(t, connect.CodeCanceled, a.err)
		waitWaiters(t, c, l, 2)

		_, err = lead.Release(ctx, &ticketv1.ReleaseRequest{Key: "fifo", Token: h.GetToken()})
		require.NoError(t, err)
		a = recv(t, out)
		require.NoError(t, a.err)
		assert.Equal(t, "w1", a.name, "first come, first served")
		assert.Equal(t, h.GetToken()+1, a.res.GetToken())
		noReply(t, out)

		_, err = lead.Release(ctx, &ticketv1.ReleaseRequest{Key: "fifo", Token: a.res.GetToken()})
		require.NoError(t, err)
		b := recv(t, out)
		require.NoError(t, b.err)
		assert.Equal(t, "w3", b.name, "the waiter that gave up is skipped")
		assert.Equal(t, a.res.GetToken()+1, b.res.GetToken())

		// Expiry hands the key to the next waiter, never before the lease.
		const lease = 1500 * time.Millisecond
		sent := time.Now()
		e, err := lead.Acquire(ctx, &ticketv1.AcquireRequest{Key: "fifo-expire", LeaseMs: lease.Milliseconds(), Owner: "idle"})
		require.NoError(t, err)
		acquireAsync(ctx, lead, "w4", &ticketv1.AcquireRequest{Key: "fifo-expire", LeaseMs: 60_000, Owner: "w4", Wait: true}, out)
		w := recv(t, out)
		require.NoError(t, w.err)
		assert.Equal(t, e.GetToken()+1, w.res.GetToken())
		assert.GreaterOrEqual(t, w.at.Sub(sent), lease, "granted before the holder's lease ran out")
	})
}
