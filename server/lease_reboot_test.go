package server_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/applytime"
	"github.com/ticketd/ticketd/server/config"
)

// TestRebootedLeaderTakesVotersLeases, on both backends with their data on
// disk: a follower restarted without its apply-time record (deleted while
// it was down, as a host reboot voids it: another boot id) measures the
// lock's Grant and the session's CreateSession from its replay, a few
// seconds after the other voters applied them. Once leadership is
// transferred to it, it asks the voters for their own measures and lowers
// its deadlines to them (the quorum minimum, docs/design.md#leases): its
// own remaining time (a stale read on it) comes back to what the lease has
// left since the acknowledgement, not since its replay, and is never less
// than the client is owed.
func TestRebootedLeaderTakesVotersLeases(t *testing.T) {
	t.Parallel()
	const (
		lease = 60 * time.Second
		// lag is how much later than the others the follower's replay
		// measures from, at least; an answer's transit and rounding are far
		// less than tolerance, which is far less than lag.
		lag       = 4 * time.Second
		tolerance = time.Second
	)
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) {
			ctx := ctxT(t)
			r := startReplayedLeases(t, ctx, backend, lease)
			c, f, sent, acked := r.c, r.f, r.sent, r.acked
			remaining := func(key string) (time.Duration, bool) { return r.remaining(ctx, key) }
			eventually(t, func() bool {
				for _, key := range replayedLeaseKeys {
					if d, ok := remaining(key); !ok || d > lease-lag {
						return false
					}
				}
				return true
			}, "the follower has measured the leases for a while")

			c.Stop(f)
			require.NoError(t, os.Remove(filepath.Join(c.Nodes[f].Config.DataDir, applytime.FileName)))
			c.Restart(t, f)
			eventually(t, func() bool {
				if l := c.Leader(t); l != c.Nodes[f] {
					tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					_, _ = l.Cluster.TransferLeader(tctx, &ticketv1.TransferLeaderRequest{Id: c.Nodes[f].ID})
					cancel()
				}
				return c.Leader(t) == c.Nodes[f]
			}, "leadership moves to the rebooted node")

			// Measured from its replay, the new leader would have about lag
			// more than the lease has left since the acknowledgement.
			eventually(t, func() bool {
				for _, key := range replayedLeaseKeys {
					d, ok := remaining(key)
					if !ok || d > lease-time.Since(acked)+tolerance {
						return false
					}
					require.GreaterOrEqual(t, d, lease-time.Since(sent)-time.Millisecond, "%s: shorter than the client is owed", key)
				}
				return true
			}, "the rebooted leader lowers its deadlines to the voters' measures")
		})
	}
}
