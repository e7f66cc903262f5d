package server_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
	"github.com/ticketd/ticketd/server/snapfile"
)

// electionLocks is how many locks the cluster of
// TestElectionDoesNotReadTheTable holds through its election.
const electionLocks = 100_000

// longLease is the lease of every lock of the test: the longest the default
// limits allow, so that none ends during the test.
const longLease = 10 * time.Minute

// scaleWait bounds the waits of a cluster that starts from a large snapshot
// on a busy machine; no assertion depends on it being short.
const scaleWait = 2 * time.Minute

// TestElectionDoesNotReadTheTable: a three-node cluster of each backend
// restored from a snapshot of 100k locks elects a new leader (a leadership
// transfer), and no node makes a full pass of its lessor over the table for
// it (ticketd_lease_reconciles_total stays put): the new term's no-op or
// empty entry is a gap in the indexes the apply hook sees, which is not a
// restore, and promotion re-arms only the leases that changed
// (docs/design.md#leases). Every node still tracks every lock, and the new
// leader serves.
func TestElectionDoesNotReadTheTable(t *testing.T) {
	t.Parallel()
	h, data := lockSnapshot(t, electionLocks)
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) {
			c := nodetest.Start(t, 3,
				nodetest.WithBackend(backend),
				nodetest.WithPrepare(func(_ int, cfg config.Config) error { return server.Restore(cfg, h, data, nil) }))
			ctx, cancel := context.WithTimeout(context.Background(), scaleWait)
			defer cancel()

			// A write through the first leader, applied everywhere: every node
			// has applied the first term's entries before the baseline.
			first := c.Leader(t)
			idx := acquireApplied(t, c, first, "before")
			base := make([]float64, len(c.Nodes))
			for i, in := range c.Nodes {
				base[i] = metric(t, in, "ticketd_lease_reconciles_total")
				require.Equal(t, float64(electionLocks+1), metric(t, in, "ticketd_leases"), "%s tracks every lock", in.ID)
			}

			_, err := first.Cluster.TransferLeader(ctx, &ticketv1.TransferLeaderRequest{})
			require.NoError(t, err)
			var next *nodetest.Instance
			require.Eventually(t, func() bool {
				next = c.Leader(t)
				return next.ID != first.ID
			}, scaleWait, 10*time.Millisecond, "a new leader")
			require.Greater(t, acquireApplied(t, c, next, "after"), idx)

			for i, in := range c.Nodes {
				require.Equal(t, base[i], metric(t, in, "ticketd_lease_reconciles_total"),
					"%s read the whole table for an election", in.ID)
				require.Equal(t, float64(electionLocks+2), metric(t, in, "ticketd_leases"), "%s tracks every lock", in.ID)
			}
			got := held(t, next, fmt.Sprintf("k%06d", electionLocks-1))
			require.True(t, got.GetHeld(), "a restored lock is held")
			require.Positive(t, got.GetRemainingMs(), "the new leader times it")
		})
	}
}

// lockSnapshot returns the header and bytes of a snapshot of n exclusive
// locks k000000... with leases of longLease, built on a state machine directly.
func lockSnapshot(t *testing.T, n int) (*ticketv1.SnapshotHeader, []byte) {
	t.Helper()
	sm := core.NewStateMachine()
	for i := range n {
		res, err := sm.Apply(uint64(i+1), core.Grant(fmt.Sprintf("k%06d", i), longLease.Milliseconds(), "o"))
		require.NoError(t, err)
		require.Equal(t, core.OutcomeGranted, res.Outcome)
	}
	var buf bytes.Buffer
	require.NoError(t, sm.WriteSnapshot(&buf))
	h, err := snapfile.NewHeader(buf.Bytes())
	require.NoError(t, err)
	return h, buf.Bytes()
}

// acquireApplied acquires key on the leader in (retrying while it is not yet
// serving) and waits until every node of c has applied that grant; it
// returns the grant's index.
func acquireApplied(t *testing.T, c *nodetest.Cluster, in *nodetest.Instance, key string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), scaleWait)
	defer cancel()
	var idx uint64
	var last error
	defer func() {
		if t.Failed() {
			t.Logf("last error of acquire %s: %v", key, last)
		}
	}()
	require.Eventually(t, func() bool {
		// Owner "o" makes a retry after an unacknowledged grant idempotent.
		if _, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: longLease.Milliseconds(), Owner: "o"}); err != nil {
			last = err
			return false
		}
		st, err := in.Cluster.Status(ctx, &ticketv1.StatusRequest{})
		if err != nil {
			last = err
			return false
		}
		idx = st.GetAppliedIndex()
		return true
	}, scaleWait, 20*time.Millisecond, "acquire %s", key)
	for _, node := range c.Nodes {
		require.Eventually(t, func() bool {
			st, err := node.Cluster.Status(ctx, &ticketv1.StatusRequest{})
			return err == nil && st.GetAppliedIndex() >= idx
		}, scaleWait, 10*time.Millisecond, "%s applies %s", node.ID, key)
	}
	return idx
}
