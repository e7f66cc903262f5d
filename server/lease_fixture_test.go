package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// replayedLeases is the fixture of the tests of how a restarted node
// measures the leases it replays (docs/design.md#leases): a three-node
// cluster on backend holding an unrenewed lock "r/lock" and a lock
// "r/session" under a session, both of lease, and one follower f.
type replayedLeases struct {
	c *nodetest.Cluster
	f int
	// sent is just before the Acquire of "r/lock"; acked just after the
	// last acknowledgement.
	sent, acked time.Time
}

// replayedLeaseKeys are the keys of a replayedLeases fixture.
var replayedLeaseKeys = []string{"r/lock", "r/session"}

func startReplayedLeases(t *testing.T, ctx context.Context, backend string, lease time.Duration) *replayedLeases {
	t.Helper()
	c := nodetest.Start(t, 3, nodetest.WithBackend(backend))
	leader := c.Leader(t)
	r := &replayedLeases{c: c, f: -1, sent: time.Now()}
	_, err := leader.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "r/lock", LeaseMs: lease.Milliseconds(), Owner: "o1"})
	require.NoError(t, err)
	s, err := leader.Lock.CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: lease.Milliseconds()})
	require.NoError(t, err)
	_, err = leader.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "r/session", Owner: "o2", Session: s.GetSession()})
	require.NoError(t, err)
	r.acked = time.Now()
	follower := c.Follower(t)
	for i, in := range c.Nodes {
		if in == follower {
			r.f = i
		}
	}
	return r
}

// remaining is node f's own measure of key's lease (0, false while it
// cannot answer: restarting, replaying).
func (r *replayedLeases) remaining(ctx context.Context, key string) (time.Duration, bool) {
	got, err := r.c.Nodes[r.f].Lock.GetLock(ctx, &ticketv1.GetLockRequest{Key: key, Stale: true})
	if err != nil || !got.GetHeld() || got.GetRemainingMs() < 0 {
		return 0, false
	}
	return time.Duration(got.GetRemainingMs()) * time.Millisecond, true
}
