package server_test

import (
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// TestRetryInAnotherModeRefusedOnBackends: on a three-node cluster of each
// real backend, an Acquire by an owner that already holds the key is a
// retry only when it asks the same mode, limit and session. An exclusive
// Acquire by a shared holder is refused with FailedPrecondition (also when
// a follower forwards it), never answered with the shared token while
// another reader then joins; so are a shared request by an exclusive
// holder and a request outside the session the holder is under. Nothing is
// granted by a refusal; the same request is still a retry.
func TestRetryInAnotherModeRefusedOnBackends(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) {
			c := nodetest.Start(t, 3, nodetest.WithBackend(backend))
			l := c.Leader(t)
			f := c.Follower(t)
			ctx := ctxT(t)
			sharedReq := &ticketv1.AcquireRequest{Key: "m/2", LeaseMs: 30_000, Owner: "O", Mode: ticketv1.Mode_MODE_SHARED}
			held, err := l.Lock.Acquire(ctx, sharedReq)
			require.NoError(t, err)
			before := state(t, l)

			for name, in := range map[string]*nodetest.Instance{"leader": l, "follower": f} {
				_, err = in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "m/2", LeaseMs: 30_000, Owner: "O", Wait: true})
				requireCode(t, connect.CodeFailedPrecondition, err)
				assert.Contains(t, err.Error(), `holds key "m/2" as a shared lock`, name)
			}
			assert.Equal(t, before.LastToken, state(t, l).LastToken, "a refusal grants nothing")

			// Another reader joins; O's shared retry is still its holder.
			q, err := l.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "m/2", LeaseMs: 30_000, Owner: "Q", Mode: ticketv1.Mode_MODE_SHARED})
			require.NoError(t, err)
			assert.NotEqual(t, held.GetToken(), q.GetToken())
			again, err := f.Lock.Acquire(ctx, sharedReq)
			require.NoError(t, err)
			assert.Equal(t, held.GetToken(), again.GetToken())

			// An exclusive holder asked for a shared lock or a semaphore slot.
			_, err = l.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "x", LeaseMs: 30_000, Owner: "W"})
			require.NoError(t, err)
			_, err = l.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "x", LeaseMs: 30_000, Owner: "W", Mode: ticketv1.Mode_MODE_SHARED})
			requireCode(t, connect.CodeFailedPrecondition, err)
			assert.Contains(t, err.Error(), `holds key "x" as an exclusive lock`)
			_, err = l.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "x", LeaseMs: 30_000, Owner: "W", Limit: 2})
			requireCode(t, connect.CodeFailedPrecondition, err)

			// A holder under a session, asked without it or under another.
			s1, s2 := createSession(t, l, 30_000), createSession(t, l, 30_000)
			_, err = l.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s", Owner: "S", Session: s1})
			require.NoError(t, err)
			_, err = l.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s", LeaseMs: 30_000, Owner: "S"})
			requireCode(t, connect.CodeFailedPrecondition, err)
			assert.Contains(t, err.Error(), "under session")
			_, err = f.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s", Owner: "S", Session: s2})
			requireCode(t, connect.CodeFailedPrecondition, err)
		})
	}
}
