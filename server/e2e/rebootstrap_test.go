package e2e_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// TestWipedVoterRefusesToBootstrap is the reproduction on real processes:
// n3 is killed and misses lost/1 and lost/2 (tokens 1 and 2, committed on
// n1 and n2); n1 is killed, n2's data dir is wiped, and n3 then n2 are
// started with their usual command line (the bootstrap list included). n2
// must exit with status 1 saying it was already bootstrapped instead of
// voting n3 in with an empty log (which would grant lost/1 again with
// token 1); once n1 is back the grants are there, and the documented
// replacement (members remove, --join on an empty data dir) brings n2 back.
func TestWipedVoterRefusesToBootstrap(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		c := start(t, backend)
		ctx := ctxT(t)
		c.Kill(2)
		leader := c.Leader(t)
		for i, key := range []string{"lost/1", "lost/2"} {
			res, err := c.Lock(leader).Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: 120_000, Owner: "first"})
			require.NoError(t, err)
			require.Equal(t, uint64(i+1), res.GetToken())
		}
		c.Kill(0)
		c.Kill(1)
		n2 := c.Node(1)
		require.NoError(t, os.RemoveAll(n2.DataDir))
		c.Restart(2)
		c.Restart(1)
		eventually(t, func() bool { _, done := n2.ExitCode(); return done }, "the wiped n2 exits")
		code, _ := n2.ExitCode()
		require.Equal(t, 1, code)
		logs, err := os.ReadFile(n2.LogFile)
		require.NoError(t, err)
		require.Contains(t, string(logs), "member has already been bootstrapped")
		require.Contains(t, string(logs), "ticketctl members remove n2")

		c.Restart(0)
		leader = c.Leader(t)
		for i, key := range []string{"lost/1", "lost/2"} {
			h, err := c.Lock(leader).GetLock(ctx, &ticketv1.GetLockRequest{Key: key})
			require.NoError(t, err)
			require.Equal(t, uint64(i+1), h.GetToken(), "%s after the refused start", key)
		}
		_, err = c.Lock(leader).Acquire(ctx, &ticketv1.AcquireRequest{Key: "lost/1", LeaseMs: 5000, Owner: "second"})
		require.Error(t, err, "lost/1 granted again")

		_, err = c.Cluster(leader).RemoveMember(ctx, &ticketv1.RemoveMemberRequest{Id: n2.ID})
		require.NoError(t, err)
		require.NoError(t, os.RemoveAll(n2.DataDir))
		c.StartArgs(1, replaceBootstrap(c.Args(1), "--join", c.Node(leader).APIAddr))
		eventually(t, func() bool {
			st, err := c.Status(1)
			return err == nil && st.GetLastToken() == 2 && st.GetLocksHeld() == 2 && len(st.GetMembers()) == 3
		}, "the replaced n2 joins with both grants")
	})
}

// TestFreshClusterStartsInAnyOrder: the first start of a new cluster on
// real processes, its members started out of order with delays: n3, then
// n1 a second later (inside n3's wait for the others), then n2 only once
// n3 and n1 have elected a leader and granted a lock. Every member
// bootstraps (none of them was heard from before), n2 catches up, and a
// restart with the data intact works.
func TestFreshClusterStartsInAnyOrder(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		c := start(t, backend)
		ctx := ctxT(t)
		for i := range c.Len() {
			c.Kill(i)
			require.NoError(t, os.RemoveAll(c.Node(i).DataDir))
		}
		c.Restart(2)
		time.Sleep(time.Second) // a delay between two first starts, not a synchronisation
		c.Restart(0)
		leader := c.Leader(t)
		res, err := c.Lock(leader).Acquire(ctx, &ticketv1.AcquireRequest{Key: "first", LeaseMs: 120_000})
		require.NoError(t, err)
		require.Equal(t, uint64(1), res.GetToken())
		c.Restart(1)
		eventually(t, func() bool {
			st, err := c.Status(1)
			return err == nil && st.GetLastToken() == 1 && st.GetLeaderId() != ""
		}, "n2, started last, bootstraps and catches up")
		settle(t, c)
		c.Restart(1) // graceful stop, then the same command: data intact
		eventually(t, func() bool {
			st, err := c.Status(1)
			return err == nil && st.GetLastToken() == 1 && st.GetLeaderId() != ""
		}, "n2 restarts on its data")
	})
}
