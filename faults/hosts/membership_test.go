//go:build linux && faults

package hosts_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/faults/history"
	"github.com/ticketd/ticketd/faults/hosts"
)

// follower returns a running node that is not the leader l.
func follower(c *hosts.Cluster, l int) int {
	for _, i := range c.Running() {
		if i != l {
			return i
		}
	}
	return -1
}

// members returns the ids of node i's view of the configuration.
func members(t *testing.T, c *hosts.Cluster, i int) []string {
	t.Helper()
	st, err := c.Status(context.Background(), i)
	require.NoError(t, err)
	var out []string
	for _, m := range st.GetMembers() {
		out = append(out, m.GetId())
	}
	return out
}

// write acquires a fresh key through the leader until it succeeds (at most
// 30s) and returns how long that took.
func write(t *testing.T, r *recorder, key string) time.Duration {
	t.Helper()
	op, took := until(30*time.Second, func() history.Op {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := r.c.Leader(ctx)
		cancel()
		if err != nil {
			return history.Op{Outcome: history.Unknown, Code: err.Error()}
		}
		return r.acquire(l, key, "o-"+key, 60_000)
	})
	require.Equal(t, history.OK, op.Outcome, "write %s: %s", key, op)
	return took
}

// TestMembership changes the membership of a host cluster, one step after
// another, writing and reading after each (every call checked):
//   - add a fourth host with --join;
//   - remove a voter (a follower; its process is then stopped);
//   - replace a dead member (kill -9) with a fresh host;
//   - remove a member that is partitioned away (link down), then heal it:
//     the removed node must not disrupt the cluster (hashicorp/raft #524):
//     the leader and its term stay the same.
func TestMembership(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		c := hosts.Start(t, hosts.Config{Backend: backend, Nodes: 3})
		r := newRecorder(c)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		write(t, r, "before")

		// Add a fourth host with --join.
		added, err := c.AddNode(ctx)
		require.NoError(t, err)
		write(t, r, "after-add")
		g, _ := until(30*time.Second, func() history.Op { return r.get(added, "after-add") })
		require.True(t, g.Outcome == history.OK && g.Held, "read through the joined node: %s", g)

		// Remove a voter.
		l := c.WaitLeader(t, time.Minute)
		gone := follower(c, l)
		require.NoError(t, c.RemoveMember(ctx, gone))
		require.NoError(t, c.Kill(gone))
		t.Logf("recovery remove-voter %s: %v", backend, write(t, r, "after-remove"))
		require.NotContains(t, members(t, c, c.WaitLeader(t, time.Minute)), c.Node(gone).ID)

		// Replace a dead member with a fresh host.
		l = c.WaitLeader(t, time.Minute)
		dead := follower(c, l)
		require.NoError(t, c.Kill(dead))
		require.NoError(t, c.RemoveMember(ctx, dead))
		fresh, err := c.AddNode(ctx)
		require.NoError(t, err)
		t.Logf("recovery replace-dead-member %s: %v", backend, write(t, r, "after-replace"))
		g, _ = until(30*time.Second, func() history.Op { return r.get(fresh, "after-replace") })
		require.True(t, g.Outcome == history.OK && g.Held, "read through the replacement: %s", g)

		// Remove a member that is partitioned away, then heal it.
		l = c.WaitLeader(t, time.Minute)
		cut := follower(c, l)
		require.NoError(t, c.Net().Down(c.Node(cut).Host))
		require.NoError(t, c.RemoveMember(ctx, cut))
		write(t, r, "after-remove-cut")
		time.Sleep(2 * time.Second) // the cut node's election timer fires, again and again
		require.NoError(t, c.Net().Heal())
		healed := time.Now()
		t.Logf("recovery heal-removed-member %s: %v", backend, write(t, r, "after-heal"))
		// A removed member that disrupts (its RequestVotes, if any, depose
		// the leader) does so in every window: nothing tells it it was
		// removed, so its election timer keeps firing. A starved machine
		// can also cost a leader its quorum contact now and then; so the
		// cluster must keep its leader and term through one of three 2 s
		// windows, each with writes through it.
		// The removed member runs but never learns a leader, so the leader
		// is the one the remaining members agree on.
		var remaining []int
		for _, i := range c.Running() {
			if i != cut {
				remaining = append(remaining, i)
			}
		}
		quiet := false
		for w := 0; w < 3 && !quiet; w++ {
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			l, err = c.AgreedLeader(wctx, remaining)
			cancel()
			require.NoError(t, err)
			before, err := c.Status(ctx, l)
			require.NoError(t, err)
			time.Sleep(2 * time.Second) // its RequestVotes, if any, arrive
			for i := 0; i < 5; i++ {
				write(t, r, fmt.Sprintf("after-heal-%d-%d", w, i))
			}
			after, err := c.Status(ctx, l)
			require.NoError(t, err)
			quiet = before.GetLeaderId() == after.GetLeaderId() && before.GetTerm() == after.GetTerm()
			t.Logf("heal of a removed member, window %d: leader %s term %d → leader %s term %d", w+1,
				before.GetLeaderId(), before.GetTerm(), after.GetLeaderId(), after.GetTerm())
		}
		require.True(t, quiet, "the removed member disrupted the cluster: leader or term moved in every window since the heal %v ago", time.Since(healed).Round(time.Millisecond))
		require.NotContains(t, members(t, c, l), c.Node(cut).ID)

		// Everything acknowledged is there on every member.
		for _, i := range c.Running() {
			if i == cut {
				continue
			}
			for _, key := range []string{"before", "after-add", "after-remove", "after-replace", "after-heal"} {
				g, _ := until(10*time.Second, func() history.Op { return r.get(i, key) })
				require.True(t, g.Outcome == history.OK && g.Held, "%s on %s: %s", key, c.Node(i).ID, g)
			}
		}
		r.verify(t)
	})
}

// TestMove restarts a follower on a new address (a host that comes back
// with another IP): it rejoins through membership (AddMember with its id
// and new addresses) and is then needed for a quorum: with another
// follower killed, writes still commit.
func TestMove(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		c := hosts.Start(t, hosts.Config{Backend: backend, Nodes: 3})
		r := newRecorder(c)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		write(t, r, "before")
		l := c.WaitLeader(t, time.Minute)
		moved := follower(c, l)
		oldAddr := c.Node(moved).RaftAddr()
		start := time.Now()
		require.NoError(t, c.Move(ctx, moved))
		t.Logf("recovery move %s: rejoined at %s (was %s) in %v", backend, c.Node(moved).RaftAddr(), oldAddr, time.Since(start))
		write(t, r, "after-move")
		g, took := until(30*time.Second, func() history.Op { return r.get(moved, "after-move") })
		require.True(t, g.Outcome == history.OK && g.Held, "read through the moved node: %s", g)
		t.Logf("recovery move-read %s: first read through the moved node after %v", backend, took)

		// The moved node is now needed for every commit.
		l = c.WaitLeader(t, time.Minute)
		var other int
		for _, i := range c.Running() {
			if i != l && i != moved {
				other = i
			}
		}
		require.NoError(t, c.Kill(other))
		t.Logf("recovery move-quorum %s: %v", backend, write(t, r, "quorum-with-moved"))
		st, err := c.Status(ctx, c.WaitLeader(t, time.Minute))
		require.NoError(t, err)
		for _, m := range st.GetMembers() {
			if m.GetId() == c.Node(moved).ID {
				require.Equal(t, c.Node(moved).RaftAddr(), m.GetRaftAddr())
				require.Equal(t, c.Node(moved).APIAddr(), m.GetApiAddr())
			}
		}
		r.verify(t)
	})
}
