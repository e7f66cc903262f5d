package server_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/applytime"
	"github.com/ticketd/ticketd/server/config"
)

// TestRestartedNodeMeasuresReplayedLeases, on both backends with their data
// on disk: a follower restarted after a lock's Grant and a session's
// CreateSession measures both from its first run's apply, kept in its
// data dir's apply-time record (docs/design.md#leases), not from its replay:
// the remaining time it reports (a stale read on it, its own measure) does
// not grow back towards the full lease across the restart, and is never
// less than the client is owed.
func TestRestartedNodeMeasuresReplayedLeases(t *testing.T) {
	t.Parallel()
	const lease = 60 * time.Second
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) {
			ctx := ctxT(t)
			r := startReplayedLeases(t, ctx, backend, lease)
			c, f, sent, remaining := r.c, r.f, r.sent, func(key string) (time.Duration, bool) { return r.remaining(ctx, key) }
			before := map[string]time.Duration{}
			eventually(t, func() bool {
				for _, key := range replayedLeaseKeys {
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
				for _, key := range replayedLeaseKeys {
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
