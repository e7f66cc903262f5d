package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/server/applytime"
)

// The lease bound through restarts (docs/design.md#leases): an unrenewed
// lock, and an abandoned session, ends no later than max(its lease measured
// from the acknowledgement of its last Grant/Renew/KeepAlive, the moment the
// last leader took office) + one election + one expiry round, whatever the
// kills, restarts and transfers — and never before its lease (checkBound,
// which adds the measured lateness of the expiry on a loaded machine). A
// node that measured a replayed lease from its replay would keep these
// alive for up to restartLease past its restart: 1.5× at half the lease,
// well past boundSlack, and would expire them on time by that measure.

// restartLease is the lease of the lock and the TTL of the session of the
// restart tests (L): long enough that a restart at L/2 measured from the
// replay (1.5 L = 15 s) overshoots L + boundSlack (12.5 s) by far.
const restartLease = 10 * time.Second

// restartRun is one restart test's cluster and its two leases, watched.
type restartRun struct {
	c     *ticketdtest.Cluster
	w     *lockWatch
	taken time.Time // when the first lease was sent
}

// startRestartRun starts a three-node cluster of backend with the failover
// timing of TestLeaseBoundAcrossFailovers (its options edited by edit, if
// any), takes an unrenewed lock and a session with one holder (both for
// restartLease), and watches them.
func startRestartRun(t *testing.T, backend string, edit ...func(*ticketdtest.Options)) *restartRun {
	c := startBoundCluster(t, backend, 3, edit...)
	ctx := ctxT(t)
	r := &restartRun{c: c, w: watchLocks(t, c)}
	leader := c.Leader(t)

	r.taken = time.Now()
	got, err := c.Lock(leader).Acquire(ctx, &ticketv1.AcquireRequest{Key: "restart/lock", LeaseMs: restartLease.Milliseconds(), Owner: "restart-lock"})
	require.NoError(t, err)
	r.w.add(&boundLock{what: "lock", key: "restart/lock", token: got.GetToken(), sent: r.taken, acked: time.Now()})

	sent := time.Now()
	s, err := c.Lock(leader).CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: restartLease.Milliseconds()})
	require.NoError(t, err)
	acked := time.Now()
	held, err := c.Lock(leader).Acquire(ctx, &ticketv1.AcquireRequest{Key: "restart/session", Owner: "restart-session", Session: s.GetSession()})
	require.NoError(t, err)
	r.w.add(&boundLock{what: "session", key: "restart/session", token: held.GetToken(), session: s.GetSession(), sent: sent, acked: acked})
	return r
}

// since returns how long ago the first lease was sent.
func (r *restartRun) since() time.Duration { return time.Since(r.taken) }

// check waits until both leases have ended and checks each against the
// bound (checkBound). It logs the worst lifetime ÷ lease beside the
// bound's.
func (r *restartRun) check(t *testing.T, backend, pattern string) {
	worst, worstBound, late := checkBound(t, r.c, r.w, restartLease)
	t.Logf("%s, %s: worst lifetime / lease = %.3f (bound %.3f; latest expiry %v late)", backend, pattern, worst, worstBound, late)
}

// caughtUp reports whether node i runs, has replayed its log and applied
// everything the leader had committed.
func caughtUp(c *ticketdtest.Cluster, i, leader int) bool {
	st, err := c.Status(i)
	if err != nil || st.GetReplaying() {
		return false
	}
	lst, err := c.Status(leader)
	return err == nil && st.GetAppliedIndex() >= lst.GetCommitIndex()
}

// TestLeaseBoundRestartThenTransfer: at half the lease a follower is killed
// (kill -9) and restarted; once it has caught up, leadership is transferred
// to it. It replays the lock's Grant and the session's CreateSession, and
// must measure them from its earlier run's apply: a node measuring from its
// replay would keep both alive 1.5× their lease.
func TestLeaseBoundRestartThenTransfer(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		restartThenTransfer(t, backend, "restart then transfer", nil)
	})
}

// TestLeaseBoundRebootThenTransfer: as TestLeaseBoundRestartThenTransfer,
// but the follower's apply-time record is deleted while it is down, as a
// host reboot voids it (its boot id no longer matches): the restarted node
// measures the lock's Grant and the session's CreateSession from its
// replay, 1.5× their lease. Its deadlines must come back from the other
// voters' reports, gathered once it is promoted (the quorum minimum,
// docs/design.md#leases).
func TestLeaseBoundRebootThenTransfer(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		restartThenTransfer(t, backend, "reboot then transfer", wipeApplyTimes(t))
	})
}

// TestLeaseBoundRebootThenTransferSecure: TestLeaseBoundRebootThenTransfer
// over client TLS, peer mutual TLS and authorization: the voters answer the
// new leader's request for their measures only because it presents its
// node certificate, and it believes each answer only because the voter
// presents its own (docs/security.md#peer-identity-is-membership).
func TestLeaseBoundRebootThenTransferSecure(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		dir := makeCerts(t, 3, "e2e")
		_, authArgs := writeAuthFiles(t, dir, authPolicy)
		secure := func(o *ticketdtest.Options) {
			o.Args = append(o.Args, authArgs...)
			o.TLS = &ticketdtest.TLS{CertsDir: dir, Peer: true, Client: "e2e"}
		}
		restartThenTransfer(t, backend, "reboot then transfer, secure", wipeApplyTimes(t), secure)
	})
}

// wipeApplyTimes returns a whileDown of restartThenTransfer that deletes
// the stopped node's apply-time record, as a host reboot voids it.
func wipeApplyTimes(t *testing.T) func(c *ticketdtest.Cluster, f int) {
	return func(c *ticketdtest.Cluster, f int) {
		err := os.Remove(filepath.Join(c.Node(f).DataDir, applytime.FileName))
		require.NoError(t, err, "the apply-time record of the killed follower")
	}
}

// restartThenTransfer kills (kill -9) a follower at half the lease, calls
// whileDown (if set) with it down, restarts it and, once it has caught up,
// transfers leadership to it; then checks the bound on both leases. edit
// (if any) changes the cluster's options.
func restartThenTransfer(t *testing.T, backend, pattern string, whileDown func(c *ticketdtest.Cluster, f int), edit ...func(*ticketdtest.Options)) {
	r := startRestartRun(t, backend, edit...)
	c := r.c
	time.Sleep(restartLease/2 - r.since())
	leader := c.Leader(t)
	f := (leader + 1) % c.Len()
	c.Kill(f)
	if whileDown != nil {
		whileDown(c, f)
	}
	c.Restart(f)
	eventually(t, func() bool { return caughtUp(c, f, c.Leader(t)) }, "the restarted follower catches up")
	moveLeader(t, c, c.Leader(t), f)
	t.Logf("n%d restarted and leads %v after the grant", f+1, r.since())
	r.check(t, backend, pattern)
}

// TestLeaseBoundKillRestartLeader: the leader is killed (kill -9) and
// restarted at once, again and again, until the leader is a node that
// restarted after half the lease (every replay of the lease's entries
// came after it began) or the lease is nearly over. A node measuring from
// its replay would keep the lock and the session alive 1.5× their lease or
// more once such a node leads.
func TestLeaseBoundKillRestartLeader(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		r := startRestartRun(t, backend)
		c := r.c
		restarted := map[int]time.Duration{} // node -> its last restart, after the grant
		kills := 0
		for r.since() < restartLease-2*time.Second {
			time.Sleep(restartLease / 10)
			leader := c.Leader(t)
			if at, ok := restarted[leader]; ok && at >= restartLease/2 {
				break // a node that replayed the leases after L/2 leads
			}
			c.Kill(leader)
			c.Restart(leader)
			restarted[leader] = r.since()
			kills++
			nl := c.WaitLeader(t, safety)
			t.Logf("kill %d: n%d killed and restarted at %v; n%d leads", kills, leader+1, restarted[leader], nl+1)
		}
		r.check(t, backend, fmt.Sprintf("%d leader kills with restarts", kills))
	})
}
