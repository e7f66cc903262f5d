package server_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/forward"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// TestFollowerForwardsEverything serves every leader-only RPC through a
// follower of a real three-node hashicorp cluster.
func TestFollowerForwardsEverything(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, 3)
	ctx := ctxT(t)
	leader := c.Leader(t)
	f := c.Follower(t)

	cctx, ci := connect.NewClientContext(ctx)
	res, err := f.Lock.Acquire(cctx, &ticketv1.AcquireRequest{Key: "fw", LeaseMs: 5000, Owner: "o"})
	require.NoError(t, err)
	assert.Equal(t, leader.ID, ci.ResponseHeader().Get(forward.LeaderHeader), "the follower names the leader")
	tok := res.GetToken()

	_, err = f.Lock.Renew(ctx, &ticketv1.RenewRequest{Key: "fw", Token: tok})
	require.NoError(t, err)
	got, err := f.Lock.GetLock(ctx, &ticketv1.GetLockRequest{Key: "fw"})
	require.NoError(t, err)
	assert.Equal(t, tok, got.GetToken())
	assert.Greater(t, got.GetRemainingMs(), int64(0), "the leader's lessor answers")
	list, err := f.Lock.ListLocks(ctx, &ticketv1.ListLocksRequest{Prefix: "f"})
	require.NoError(t, err)
	require.Len(t, list.GetLocks(), 1)
	chk, err := f.Lock.CheckToken(ctx, &ticketv1.CheckTokenRequest{Key: "fw", Token: tok})
	require.NoError(t, err)
	assert.True(t, chk.GetValid())

	eventually(t, func() bool {
		st, err := f.Lock.GetLock(ctx, &ticketv1.GetLockRequest{Key: "fw", Stale: true})
		// The follower's own lessor measures the lease from its own apply
		// of the Renew (docs/design.md#leases), so it reports a meaningful
		// remaining time.
		return err == nil && st.GetHeld() && st.GetRemainingMs() > 0 && st.GetRemainingMs() <= 5000
	}, "a stale read is served by the follower itself, with its own remaining time")
	st, err := f.Cluster.Status(ctx, &ticketv1.StatusRequest{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), st.GetLeasesTracked(), "the follower tracks the lease itself")

	_, err = f.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "fw", LeaseMs: 5000})
	requireCode(t, connect.CodeAlreadyExists, err) // the leader's code comes back unchanged
	_, err = f.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "fw", Token: tok})
	require.NoError(t, err)
	_, err = f.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "fw", Token: tok})
	requireCode(t, connect.CodeNotFound, err)
}

// TestTransferFailsWaitersWithHint moves leadership while requests wait: they
// fail with Unavailable naming the new leader, and a retry there succeeds.
func TestTransferFailsWaitersWithHint(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, 3)
	ctx := ctxT(t)
	leader := c.Leader(t)
	h, err := leader.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 30_000, Owner: "h"})
	require.NoError(t, err)
	out := make(chan acquired, 1)
	acquireAsync(ctx, leader, "w", &ticketv1.AcquireRequest{Key: "k", LeaseMs: 30_000, Owner: "w", Wait: true}, out)
	waitWaiters(t, leader, 1)

	tr, err := leader.Cluster.TransferLeader(ctx, &ticketv1.TransferLeaderRequest{})
	require.NoError(t, err)
	a := recvAcquired(t, out)
	requireCode(t, connect.CodeUnavailable, a.err)
	hint, ok := leaderHint(a.err)
	if ok { // the hint is present once the old leader has heard of the new one
		assert.Equal(t, tr.GetLeaderId(), hint.GetLeaderId())
	}

	nl := c.Leader(t)
	require.NotEqual(t, leader.ID, nl.ID)
	got := held(t, nl, "k")
	assert.Equal(t, h.GetToken(), got.GetToken(), "the lock survives the transfer")
	_, err = nl.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "k", Token: h.GetToken()})
	require.NoError(t, err)
	res, err := leader.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 30_000, Owner: "w", Wait: true})
	require.NoError(t, err, "the waiter re-queues (here via the old leader, now forwarding)")
	assert.Greater(t, res.GetToken(), h.GetToken())
}

// TestRestartKeepsState restarts a lone hashicorp node from its data dir.
func TestRestartKeepsState(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, 1)
	ctx := ctxT(t)
	in := c.Nodes[0]
	a, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "a", LeaseMs: 60_000, Owner: "o"})
	require.NoError(t, err)
	b, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "b", LeaseMs: 60_000})
	require.NoError(t, err)
	_, err = in.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "b", Token: b.GetToken()})
	require.NoError(t, err)

	c.Stop(0)
	c.Restart(t, 0)
	in = c.Leader(t)
	got := held(t, in, "a")
	assert.Equal(t, a.GetToken(), got.GetToken())
	assert.False(t, held(t, in, "b").GetHeld())
	again, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "a", LeaseMs: 60_000, Owner: "o"})
	require.NoError(t, err, "the owner's retry after a restart gets its lock")
	assert.Equal(t, a.GetToken(), again.GetToken())
	c2, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "c", LeaseMs: 60_000})
	require.NoError(t, err)
	assert.Equal(t, b.GetToken()+1, c2.GetToken(), "the token counter survives")
}

// TestJoinAndRemoveMember grows a three-node cluster to four through join,
// then removes the new member again.
func TestJoinAndRemoveMember(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, 3)
	ctx := ctxT(t)
	f := c.Follower(t)
	i := c.Join(t, 0)
	joined := c.Nodes[i]
	eventually(t, func() bool {
		st, err := joined.Cluster.Status(ctx, &ticketv1.StatusRequest{})
		if err != nil || len(st.GetMembers()) != 4 || st.GetLeaderAddr() == "" {
			return false
		}
		for _, m := range st.GetMembers() {
			if m.GetApiAddr() == "" {
				return false
			}
		}
		return true
	}, "the new node sees four members with API addresses")
	res, err := joined.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "via-new", LeaseMs: 5000})
	require.NoError(t, err, "the new member forwards to the leader")
	assert.Equal(t, uint64(1), res.GetToken())

	rm, err := f.Cluster.RemoveMember(ctx, &ticketv1.RemoveMemberRequest{Id: joined.ID})
	require.NoError(t, err)
	assert.Len(t, rm.GetMembers(), 3)
	c.Stop(i)
	st, err := f.Cluster.Status(ctx, &ticketv1.StatusRequest{})
	require.NoError(t, err)
	assert.Len(t, st.GetMembers(), 3)
}

// TestGracefulCloseHandsOverLeadership closes the leader (SIGTERM path): a
// follower takes over at once and the held lock keeps its token.
func TestGracefulCloseHandsOverLeadership(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, 3)
	ctx := ctxT(t)
	leader := c.Leader(t)
	h, err := leader.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 30_000})
	require.NoError(t, err)
	for i, in := range c.Nodes {
		if in == leader {
			c.Stop(i)
		}
	}
	nl := c.Leader(t)
	assert.NotEqual(t, leader.ID, nl.ID)
	assert.Equal(t, h.GetToken(), held(t, nl, "k").GetToken())
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = nl.Lock.Renew(tctx, &ticketv1.RenewRequest{Key: "k", Token: h.GetToken()})
	require.NoError(t, err)
}
