package server_test

import (
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// TestStaleReadsRefusedWhileReplaying: a node that has not yet applied the
// commit index it recorded before its restart refuses stale reads with
// Unavailable and says so in Status, so a stale read never goes backwards
// across a restart (docs/design.md#reads); linearizable reads are unaffected.
func TestStaleReadsRefusedWhileReplaying(t *testing.T) {
	t.Parallel()
	in, mem := memNode(t)
	ctx := ctxT(t)
	_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "a", LeaseMs: 10_000, Owner: "o"})
	require.NoError(t, err)
	applied := state(t, in).AppliedIndex

	mem.SetRecoveredCommitIndex(applied + 5) // as if restarted and replaying
	_, err = in.Lock.GetLock(ctx, &ticketv1.GetLockRequest{Key: "a", Stale: true})
	requireCode(t, connect.CodeUnavailable, err)
	_, err = in.Lock.ListLocks(ctx, &ticketv1.ListLocksRequest{Stale: true})
	requireCode(t, connect.CodeUnavailable, err)
	st, err := in.Cluster.Status(ctx, &ticketv1.StatusRequest{})
	require.NoError(t, err)
	require.True(t, st.GetReplaying())
	require.Equal(t, applied+5, st.GetReplayTargetIndex())
	res, err := in.Lock.GetLock(ctx, &ticketv1.GetLockRequest{Key: "a"})
	require.NoError(t, err, "a linearizable read goes through ReadIndex")
	require.True(t, res.GetHeld())

	mem.SetRecoveredCommitIndex(applied) // replay done
	res, err = in.Lock.GetLock(ctx, &ticketv1.GetLockRequest{Key: "a", Stale: true})
	require.NoError(t, err)
	require.True(t, res.GetHeld())
	st, err = in.Cluster.Status(ctx, &ticketv1.StatusRequest{})
	require.NoError(t, err)
	require.False(t, st.GetReplaying())
}

// TestRestartedNodeNeverReadsBackwards (docs/design.md#reads), on both
// backends: a node restarted alone (no quorum, so it cannot learn anything
// newer) either serves a stale read from a state at least as new as before its
// stop or refuses it with Unavailable while Status says it is replaying; it
// never answers that a lock it had applied is free.
func TestRestartedNodeNeverReadsBackwards(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) {
			c := nodetest.Start(t, 3, nodetest.WithBackend(backend))
			ctx := ctxT(t)
			res, err := c.Leader(t).Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "a", LeaseMs: 60_000, Owner: "o"})
			require.NoError(t, err)
			f := c.Follower(t)
			eventually(t, func() bool {
				r, err := f.Lock.GetLock(ctx, &ticketv1.GetLockRequest{Key: "a", Stale: true})
				return err == nil && r.GetToken() == res.GetToken()
			}, "the follower applied the grant")
			fi := -1
			for i, in := range c.Nodes {
				if in == f {
					fi = i
				}
			}
			for i := range c.Nodes {
				c.Stop(i)
			}
			c.Restart(t, fi)
			st, err := f.Cluster.Status(ctx, &ticketv1.StatusRequest{})
			require.NoError(t, err)
			r, err := f.Lock.GetLock(ctx, &ticketv1.GetLockRequest{Key: "a", Stale: true})
			if st.GetReplaying() || err != nil {
				requireCode(t, connect.CodeUnavailable, err)
				t.Logf("replaying: applied %d of %d", st.GetAppliedIndex(), st.GetReplayTargetIndex())
				return
			}
			require.True(t, r.GetHeld(), "a stale read went backwards")
			require.Equal(t, res.GetToken(), r.GetToken())
			t.Logf("replayed at once: applied %d, target %d", st.GetAppliedIndex(), st.GetReplayTargetIndex())
		})
	}
}
