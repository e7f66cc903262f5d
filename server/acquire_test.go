package server_test

import (
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
)

// These tests drive Acquire's shared-lock and session fields (mode, limit, session) over
// real HTTP on loopback: validation, limit mismatch with its detail, shared
// holders together, and a batch of readers served at once.

func TestAcquireModeAndLimitValidation(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t, withConfig(func(c *config.Config) { c.Lease.MinMS = 100; c.Lease.MaxMS = 60_000 }))
	ctx := ctxT(t)
	tests := []struct {
		name  string
		req   *ticketv1.AcquireRequest
		field string // the Ticketd-Invalid-Field header
	}{
		{name: "limit_above_max", req: &ticketv1.AcquireRequest{Key: "k", LeaseMs: 1000, Limit: server.MaxLimit + 1}, field: "limit"},
		{name: "shared_with_limit", req: &ticketv1.AcquireRequest{Key: "k", LeaseMs: 1000, Mode: ticketv1.Mode_MODE_SHARED, Limit: 2}, field: "limit"},
		{name: "unknown_mode", req: &ticketv1.AcquireRequest{Key: "k", LeaseMs: 1000, Mode: ticketv1.Mode(7)}, field: "mode"},
		{name: "lease_zero_without_session", req: &ticketv1.AcquireRequest{Key: "k"}, field: "lease_ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := in.Lock.Acquire(ctx, tc.req)
			requireCode(t, connect.CodeInvalidArgument, err)
			var ce *connect.Error
			require.True(t, asConnect(err, &ce))
			assert.Equal(t, tc.field, ce.Meta().Get(server.InvalidFieldHeader))
		})
	}
	assert.False(t, held(t, in, "k").GetHeld(), "bad input changes nothing")

	// The largest limit is accepted.
	res, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 1000, Limit: server.MaxLimit})
	require.NoError(t, err)
	assert.NotZero(t, res.GetToken())
}

func TestAcquireUnknownSession(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t)
	// lease_ms may be 0 under a session (its TTL applies): the request
	// passes validation and the state machine refuses the unknown session.
	_, err := in.Lock.Acquire(ctxT(t), &ticketv1.AcquireRequest{Key: "k", Session: 424242})
	requireCode(t, connect.CodeNotFound, err)
	assert.Contains(t, err.Error(), "session 424242 not found")
	assert.False(t, held(t, in, "k").GetHeld())
}

func TestAcquireLimitMismatch(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t)
	ctx := ctxT(t)
	_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s", LeaseMs: 5000, Owner: "a", Limit: 2})
	require.NoError(t, err)
	for _, limit := range []uint32{0, 3} {
		_, err = in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s", LeaseMs: 5000, Owner: "b", Limit: limit, Wait: true})
		requireCode(t, connect.CodeFailedPrecondition, err)
		var ce *connect.Error
		require.True(t, asConnect(err, &ce))
		var detail *ticketv1.LimitMismatch
		for _, d := range ce.Details() {
			v, derr := d.Value()
			require.NoError(t, derr)
			if lm, ok := v.(*ticketv1.LimitMismatch); ok {
				detail = lm
			}
		}
		require.NotNil(t, detail, "LimitMismatch detail")
		assert.Equal(t, uint32(2), detail.GetLimit())
		assert.Contains(t, ce.Message(), "limit 2")
	}
}

func TestSharedReadersThenWriter(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t)
	ctx := ctxT(t)
	w0, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "d", LeaseMs: 5000, Owner: "w0"})
	require.NoError(t, err)
	out := make(chan acquired, 4)
	names := []string{"r1", "r2", "r3"}
	for i, name := range names {
		acquireAsync(ctx, in, name, &ticketv1.AcquireRequest{Key: "d", LeaseMs: 5000, Owner: name, Mode: ticketv1.Mode_MODE_SHARED, Wait: true}, out)
		waitWaiters(t, in, i+1)
	}
	acquireAsync(ctx, in, "w1", &ticketv1.AcquireRequest{Key: "d", LeaseMs: 5000, Owner: "w1", Wait: true}, out)
	waitWaiters(t, in, 4)

	_, err = in.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "d", Token: w0.GetToken()})
	require.NoError(t, err)
	readers := map[string]uint64{}
	for range names {
		a := recvAcquired(t, out)
		require.NoError(t, a.err, a.name)
		readers[a.name] = a.res.GetToken()
	}
	assert.Len(t, readers, 3, "every shared waiter at the head is served at once")
	waitWaiters(t, in, 1) // w1 waits for all three
	// A reader without wait would fit beside the three, but w1 is ahead: it
	// is refused at once with Aborted (no claim on the table), not made to
	// wait up to a reader's whole lease, and nothing is proposed.
	before := state(t, in)
	_, err = in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "d", LeaseMs: 5000, Owner: "r4", Mode: ticketv1.Mode_MODE_SHARED})
	require.Equal(t, connect.CodeAborted, connect.CodeOf(err), "%v", err)
	require.Equal(t, before, state(t, in))
	for _, tok := range readers {
		assert.Greater(t, tok, w0.GetToken())
		_, err = in.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "d", Token: tok})
		require.NoError(t, err)
	}
	w1 := recvAcquired(t, out)
	require.NoError(t, w1.err)
	assert.Equal(t, "w1", w1.name)
}

// TestMaxLocksCountsHolders: limits.max_locks counts holders (a shared
// key's too), a holder's retry is not a new one, and the refusal names the
// key, as the session caps' messages do.
func TestMaxLocksCountsHolders(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t, withConfig(func(c *config.Config) { c.Limits.MaxLocks = 2 }))
	ctx := ctxT(t)
	shared := func(owner string) *ticketv1.AcquireRequest {
		return &ticketv1.AcquireRequest{Key: "r", LeaseMs: 5000, Owner: owner, Mode: ticketv1.Mode_MODE_SHARED}
	}
	for _, o := range []string{"r1", "r2"} {
		_, err := in.Lock.Acquire(ctx, shared(o))
		require.NoError(t, err)
	}
	_, err := in.Lock.Acquire(ctx, shared("r3"))
	requireCode(t, connect.CodeResourceExhausted, err) // one key, but a third holder
	assert.Contains(t, err.Error(), "the lock table is full: 2 locks (limits.max_locks)", "the message names the key to raise")
	_, err = in.Lock.Acquire(ctx, shared("r1"))
	require.NoError(t, err, "a holder's retry is not a new holder")
	assert.Len(t, held(t, in, "r").GetHolders(), 2)
}
