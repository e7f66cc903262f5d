package server_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// TestStartFromSnapshotLoadsLeases, on both backends with their data on
// disk: a node that starts from a snapshot — each node of a cluster
// restored from one, then a follower restarted on its data (its snapshot
// plus the log after it) — builds its lessor from the restored table in
// one direct load, never by comparing the table with what it tracks
// (ticketd_lease_loads_total equals ticketd_lease_reconciles_total, one
// per start): a fresh process tracks nothing to compare with
// (docs/design.md#leases). Every lock is tracked and timed after it.
func TestStartFromSnapshotLoadsLeases(t *testing.T) {
	t.Parallel()
	const locks = 10_000
	h, data := lockSnapshot(t, locks)
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) {
			c := nodetest.Start(t, 3,
				nodetest.WithBackend(backend),
				nodetest.WithPrepare(func(_ int, cfg config.Config) error { return server.Restore(cfg, h, data, nil) }))
			acquireApplied(t, c, c.Leader(t), "before")
			loaded := func(in *nodetest.Instance, leases int) {
				t.Helper()
				require.Equal(t, 1.0, metric(t, in, "ticketd_lease_reconciles_total"), "%s: one pass over the restored table", in.ID)
				require.Equal(t, 1.0, metric(t, in, "ticketd_lease_loads_total"), "%s: that pass was a direct load", in.ID)
				require.Equal(t, float64(leases), metric(t, in, "ticketd_leases"), "%s tracks every lock", in.ID)
			}
			for _, in := range c.Nodes {
				loaded(in, locks+1)
			}

			f := c.Follower(t)
			i := -1
			for k, in := range c.Nodes {
				if in == f {
					i = k
				}
			}
			c.Stop(i)
			c.Restart(t, i)
			acquireApplied(t, c, c.Leader(t), "after")
			loaded(f, locks+2)
			got := held(t, f, fmt.Sprintf("k%06d", locks-1))
			require.True(t, got.GetHeld(), "a restored lock is held on the restarted follower")
		})
	}
}
