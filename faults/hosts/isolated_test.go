//go:build linux && faults

package hosts_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/faults/history"
	"github.com/ticketd/ticketd/faults/hosts"
)

// others returns the nodes of c other than i.
func others(c *hosts.Cluster, i int) []int {
	var out []int
	for j := range c.Len() {
		if j != i {
			out = append(out, j)
		}
	}
	return out
}

// TestIsolatedLeader cuts the leader from its peers but not from its
// clients (Consul #54; Jepsen's 2014 etcd and Consul stale reads) and
// checks, through the old leader, that:
//   - stale read: after the majority releases a lock and grants it anew,
//     GetLock and CheckToken either fail or show the new holder;
//   - minority leader: it accepts no write (Acquire, Release, Renew) and
//     expires nothing: a lock renewed through the majority outlives its
//     lease many times over and is still held after the heal.
//
// Every call is recorded and checked (porcupine model, fencing, lease).
func TestIsolatedLeader(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		c := hosts.Start(t, hosts.Config{Backend: backend, Nodes: 3})
		r := newRecorder(c)
		old := c.WaitLeader(t, time.Minute)
		// kept's lease outlasts the election and the first write after the
		// cut, when its renewals through the new leader start: leases are
		// exact across failover (no fresh lease at promotion:
		// docs/design.md#leases).
		const lease = 2500
		a := r.acquire(old, "stale", "a", 60_000)
		require.Equal(t, history.OK, a.Outcome, a.String())
		kept := r.acquire(old, "kept", "k", lease)
		require.Equal(t, history.OK, kept.Outcome, kept.String())

		require.NoError(t, c.Net().Isolate(c.Node(old).Host, c.Hosts()...))
		cut := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		maj, err := c.AgreedLeader(ctx, others(c, old))
		require.NoError(t, err)
		// A new leader is there: the first write through it.
		w, took := until(30*time.Second, func() history.Op { return r.acquire(maj, "after-cut", "w", 60_000) })
		require.Equal(t, history.OK, w.Outcome, w.String())
		t.Logf("recovery isolate-leader-from-peers %s: first write through the majority %v after the cut (%v after a new leader)", backend, time.Since(cut), took)
		// Keep "kept" alive through the leader of the majority, whichever it
		// is, until the end; a refusal means something expired it.
		stop := make(chan struct{})
		defer close(stop)
		expired := r.client(1).renewer("kept", kept.Token, lease/4*time.Millisecond, stop)
		rel := r.release(maj, "stale", a.Token)
		require.Equal(t, history.OK, rel.Outcome, rel.String())
		b := r.acquire(maj, "stale", "b", 60_000)
		require.Equal(t, history.OK, b.Outcome, b.String())
		require.Greater(t, b.Token, a.Token)

		// Stale read: through the old leader, fail or show the new holder.
		// Calls to it are cut short: they are expected to hang.
		ro := r.impatient(time.Second)
		g := ro.get(old, "stale")
		if g.Outcome == history.OK {
			require.True(t, g.Held && g.HolderToken == b.Token, "stale read through the isolated leader: %s", g)
		}
		ct := ro.checkToken(old, "stale", a.Token)
		if ct.Outcome == history.OK {
			require.False(t, ct.Valid, "isolated leader says the released token is valid: %s", ct)
		}
		// Minority leader: no write takes effect.
		for _, op := range []history.Op{
			ro.acquire(old, "minority", "m", lease),
			ro.release(old, "stale", b.Token),
			ro.renew(old, "stale", b.Token),
		} {
			require.NotEqual(t, history.OK, op.Outcome, "isolated leader accepted a write: %s", op)
		}
		// Let the lease run out three times over, as the isolated leader sees it.
		time.Sleep(3 * lease * time.Millisecond)
		require.NoError(t, c.Net().Heal())
		healed := time.Now()
		l := c.WaitLeader(t, time.Minute)
		op, _ := until(30*time.Second, func() history.Op { return r.acquire(l, "after-heal", "h", 60_000) })
		require.Equal(t, history.OK, op.Outcome, op.String())
		t.Logf("recovery heal-isolated-leader %s: agreed leader and a write %v after the heal", backend, time.Since(healed))
		time.Sleep(lease * time.Millisecond)
		select {
		case op := <-expired:
			t.Fatalf("the lock renewed through the majority was expired: %s", op)
		default:
		}
		for _, i := range c.Running() {
			// The formerly isolated node may still be reconnecting to the
			// new leader: wait (bounded) for it to answer, then check what
			// it answers.
			g, _ := until(30*time.Second, func() history.Op { return r.get(i, "stale") })
			require.Equal(t, history.OK, g.Outcome, g.String())
			require.Equal(t, b.Token, g.HolderToken, g.String())
			g = r.get(i, "minority")
			require.Equal(t, history.OK, g.Outcome, g.String())
			require.False(t, g.Held, "a write accepted by the isolated leader survived: %s", g)
			g = r.get(i, "kept")
			require.Equal(t, history.OK, g.Outcome, g.String())
			require.Equal(t, kept.Token, g.HolderToken, "the lock renewed through the majority is gone: %s", g)
		}
		r.verify(t)
	})
}
