package server_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// recorded reports whether in's Status lists the member ids with an API
// address each (false if in does not answer).
func recorded(ctx context.Context, in *nodetest.Instance, ids ...string) bool {
	if in.Node == nil {
		return false
	}
	st, err := in.Cluster.Status(ctx, &ticketv1.StatusRequest{})
	if err != nil {
		return false
	}
	addrs := map[string]string{}
	for _, m := range st.GetMembers() {
		addrs[m.GetId()] = m.GetApiAddr()
	}
	for _, id := range ids {
		if addrs[id] == "" {
			return false
		}
	}
	return true
}

// TestWipedVoterRefusesToBootstrap: the reproduction of a voter that lost
// its whole data dir and restarts with its usual bootstrap list, on real
// backends on disk. n3 misses lost/1 and lost/2 (tokens 1 and 2, committed
// on n1 and n2); n1 stops, n2's data dir is wiped, n3 restarts, then n2:
// without the check n2 bootstraps an empty log, votes n3 in, and n3 grants
// lost/1 again with token 1. With it n2 refuses, naming the replacement;
// n1 and n3 keep both grants; and the replacement (remove n2, start it on
// the refused data dir with --join) brings n2 back with the grants.
func TestWipedVoterRefusesToBootstrap(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) {
			ctx := ctxT(t)
			c := nodetest.Start(t, 3, nodetest.WithBackend(backend))
			n1, n2 := c.Nodes[0], c.Nodes[1]
			eventually(t, func() bool { return recorded(ctx, n1, "n1", "n2", "n3") },
				"the leader records every founding member it heard from")
			// n3 is the member n2 asks below: its directory must hold the
			// record before it stops. The leader commits the record on a
			// majority (n1, n2) and n3 may hear of it only later; a
			// restarted n3 without it that has replayed its whole log
			// (applied = the commit index it recovered) shows no evidence,
			// and n2 rightly bootstraps.
			n3 := c.Nodes[2]
			eventually(t, func() bool { return recorded(ctx, n3, "n1", "n2", "n3") },
				"n3 applied the record of every founding member")
			c.Stop(2)
			for i, key := range []string{"lost/1", "lost/2"} {
				var res *ticketv1.AcquireResponse
				require.NoError(t, c.OnLeader(t, func(leader *nodetest.Instance) (err error) {
					res, err = leader.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: 600_000, Owner: "first"})
					return err
				}))
				require.Equal(t, uint64(i+1), res.GetToken())
			}
			c.Stop(0)
			c.Stop(1)
			require.NoError(t, os.RemoveAll(n2.Config.DataDir))
			c.Restart(t, 2)
			err := c.TryRestart(1)
			require.ErrorIs(t, err, server.ErrAlreadyBootstrapped, "n2 bootstrapped an empty data dir again")
			for _, want := range []string{"n3", "ticketctl members remove n2", "--join", n2.Config.DataDir} {
				assert.Contains(t, err.Error(), want)
			}
			t.Logf("refused: %v", err)

			c.Restart(t, 0)
			leader := c.Leader(t)
			for i, key := range []string{"lost/1", "lost/2"} {
				h := held(t, leader, key)
				assert.True(t, h.GetHeld(), "%s lost", key)
				assert.Equal(t, uint64(i+1), h.GetToken(), "%s's token", key)
			}
			res, err := leader.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "lost/1", LeaseMs: 5000, Owner: "second"})
			require.Error(t, err, "lost/1 granted again: %+v", res)

			// The replacement procedure (docs/operations.md): remove the
			// member, start it with --join on its (refused) data dir.
			_, err = leader.Cluster.RemoveMember(ctx, &ticketv1.RemoveMemberRequest{Id: "n2"})
			require.NoError(t, err)
			n2.Config.Bootstrap = nil
			n2.Config.Join = leader.Addr
			c.Restart(t, 1)
			eventually(t, func() bool {
				st, err := n2.Cluster.Status(ctx, &ticketv1.StatusRequest{})
				return err == nil && st.GetLastToken() == 2 && st.GetLocksHeld() == 2 && len(st.GetMembers()) == 3
			}, "the replaced n2 joins and holds both grants")
			eventually(t, func() bool { return recorded(ctx, n1, "n1", "n2", "n3") }, "n2's address is recorded again")
		})
	}
}

// TestLateFoundingMemberBootstraps: a founding member that starts for the
// first time after the others elected a leader and committed grants (a
// term above 1, a log past the bootstrap configuration) still bootstraps,
// because the cluster has never heard from it; it then catches up, and a
// restart with its data intact works too.
func TestLateFoundingMemberBootstraps(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		for _, late := range []int{0, 2} {
			t.Run(backend+"/"+[]string{"n1", "n2", "n3"}[late], func(t *testing.T) {
				ctx := ctxT(t)
				c := nodetest.Start(t, 3, nodetest.WithBackend(backend), nodetest.WithLater(late))
				leader := c.Leader(t)
				for _, key := range []string{"a", "b", "c"} {
					_, err := leader.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: 600_000})
					require.NoError(t, err)
				}
				var up []string
				for _, i := range c.Running() {
					up = append(up, c.Nodes[i].ID)
				}
				eventually(t, func() bool { return recorded(ctx, leader, up...) }, "the running members are recorded")
				st, err := leader.Cluster.Status(ctx, &ticketv1.StatusRequest{})
				require.NoError(t, err)
				require.Greater(t, st.GetTerm(), uint64(1))
				require.False(t, recorded(ctx, leader, c.Nodes[late].ID), "a member never heard from is recorded")

				c.Restart(t, late) // its first start: an empty data dir and the bootstrap list
				in := c.Nodes[late]
				eventually(t, func() bool {
					st, err := in.Cluster.Status(ctx, &ticketv1.StatusRequest{})
					return err == nil && st.GetLastToken() == 3 && st.GetLeaderId() != ""
				}, "the late member catches up")
				eventually(t, func() bool { return recorded(ctx, c.Leader(t), in.ID) }, "the late member is recorded once heard from")

				c.Stop(late)
				c.Restart(t, late) // data intact: no check, no refusal
				c.WaitLeader(t)
				_, err = c.Leader(t).Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "d", LeaseMs: 600_000})
				require.NoError(t, err)
			})
		}
	}
}

// TestWipedVoterRefusedWhenPeerComesUpDuringTheWait: the wiped n2 starts
// first, while n1 stays down and n3 is not up yet; n3 starts a second
// later, inside n2's wait, and its answer refuses n2's start.
func TestWipedVoterRefusedWhenPeerComesUpDuringTheWait(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	c := nodetest.Start(t, 3)
	n1, n2 := c.Nodes[0], c.Nodes[1]
	eventually(t, func() bool { return recorded(ctx, n1, "n1", "n2", "n3") }, "every founding member recorded")
	for i := range c.Nodes {
		c.Stop(i)
	}
	require.NoError(t, os.RemoveAll(n2.Config.DataDir))
	// The wait is long enough that n3, started a second later, is serving
	// before it ends even on a loaded machine; n2 is refused as soon as n3
	// answers, so the wait's length costs nothing when the check works.
	n2.Options = append(n2.Options, server.WithBootstrapProbeWait(30*time.Second))
	errc := make(chan error, 1)
	go func() { errc <- c.TryRestart(1) }()
	time.Sleep(time.Second) // n3 starts later than n2, as a restart of both may
	c.Restart(t, 2)
	require.ErrorIs(t, <-errc, server.ErrAlreadyBootstrapped)
}
