package server_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/applytime"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// TestRestartedNodeMeasuresReplayedLeases, on both backends with their data
// on disk: a follower restarted after a lock's Grant and a session's
// CreateSession measures both from its first run's apply, kept in its
// data dir's apply-time record (docs/design.md#leases), not from its replay:
// the remaining time it reports (a stale read on it, its own measure) does
// not grow back towards the full lease across the restart, and is never
// less than the client is owed.
func TestRestartedNodeMeasuresReplayedLeases(t *testing.T) {
	const lease = 60 * time.Second
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) {
			c := nodetest.Start(t, 3, nodetest.WithBackend(backend))
			ctx := ctxT(t)
			leader := c.Leader(t)
			sent := time.Now()
			_, err := leader.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "r/lock", LeaseMs: lease.Milliseconds(), Owner: "o1"})
			require.NoError(t, err)
			s, err := leader.Lock.CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: lease.Milliseconds()})
			require.NoError(t, err)
			_, err = leader.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "r/session", Owner: "o2", Session: s.GetSession()})
			require.NoError(t, err)

			f, follower := -1, c.Follower(t)
			for i, in := range c.Nodes {
				if in == follower {
					f = i
				}
			}
			// remaining is node f's own measure of key's lease (0, false
			// while it cannot answer: restarting, replaying).
			remaining := func(key string) (time.Duration, bool) {
				got, err := c.Nodes[f].Lock.GetLock(ctx, &ticketv1.GetLockRequest{Key: key, Stale: true})
				if err != nil || !got.GetHeld() || got.GetRemainingMs() < 0 {
					return 0, false
				}
				return time.Duration(got.GetRemainingMs()) * time.Millisecond, true
			}
			before := map[string]time.Duration{}
			eventually(t, func() bool {
				for _, key := range []string{"r/lock", "r/session"} {
					d, ok := remaining(key)
					if !ok || d > lease-time.Second {
						return false
					}
					before[key] = d
				}
				return true
			}, "a second of the lease passes on the follower")

			c.Stop(f)
			c.Restart(t, f)
			after := map[string]time.Duration{}
			eventually(t, func() bool {
				for _, key := range []string{"r/lock", "r/session"} {
					d, ok := remaining(key)
					if !ok {
						return false
					}
					after[key] = d
				}
				return true
			}, "the restarted follower serves its replayed leases")
			owed := lease - time.Since(sent)
			for key, d := range after {
				require.LessOrEqual(t, d, before[key]+applytime.Bucket+time.Millisecond, "%s: measured from the replay, not from the first apply", key)
				require.GreaterOrEqual(t, d, owed-time.Millisecond, "%s: shorter than the client is owed", key)
			}
		})
	}
}
