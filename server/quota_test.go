package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/memraft"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// quotaPolicy lets alice, bob and carol lock under s/, with alice's own
// quotas and everyone else's from default_quota.
const quotaPolicy = sessionPolicy + `
default_quota: {locks: 100, sessions: 100, watchers: 100, waiters: 100}
quotas:
  - {principal: alice, locks: 2, sessions: 2, watchers: 2, waiters: 2}
`

// withQuotaAuth turns authorization on with policy (quotaPolicy and its
// like) and sessionTokens, and returns the policy file's path.
func withQuotaAuth(t *testing.T, c *config.Config, policy string) string {
	withSessionAuth(t, c)
	require.NoError(t, os.WriteFile(c.AuthPolicyFile, []byte(policy), 0o600))
	return c.AuthPolicyFile
}

// quotaNode starts one in-memory node with policy and returns it with
// the clients of alice and bob.
func quotaNode(t *testing.T, policy string) (*nodetest.Instance, *memraft.Node, ticketv1connect.LockServiceClient, ticketv1connect.LockServiceClient) {
	in, mem := memNode(t, withConfig(func(c *config.Config) { withQuotaAuth(t, c, policy) }),
		nodetest.WithClientOptions(bearer("ops")))
	return in, mem, lockAs(in, "alice"), lockAs(in, "bob")
}

// quotaRefusals reads ticketd_quota_refusals_total of kind.
func quotaRefusals(t *testing.T, in *nodetest.Instance, kind string) float64 {
	return metric(t, in, fmt.Sprintf(`ticketd_quota_refusals_total{kind=%q}`, kind))
}

// requireQuota checks that err is ResourceExhausted naming principal's
// quota of limit kind from the policy key.
func requireQuota(t *testing.T, err error, principal string, limit int, kind, key string) {
	t.Helper()
	requireCode(t, connect.CodeResourceExhausted, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("principal %s is at its quota of %d %s (policy %s)", principal, limit, kind, key))
}

// TestLockQuota: alice's holders of every kind (exclusive, shared,
// semaphore slot, under a session) count against her lock quota; at it her
// next Acquire is refused with ResourceExhausted naming the quota, before
// anything is proposed, while bob's succeeds and an idempotent retry of
// alice's own lock is still answered; a Release frees a place.
func TestLockQuota(t *testing.T) {
	t.Parallel()
	in, mem, alice, bob := quotaNode(t, quotaPolicy)
	ctx := ctxT(t)
	a1, err := alice.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/a", LeaseMs: 60_000, Owner: "a1"})
	require.NoError(t, err)
	_, err = alice.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/shared", LeaseMs: 60_000, Owner: "a2", Mode: ticketv1.Mode_MODE_SHARED})
	require.NoError(t, err)

	entries := len(mem.Log())
	for _, req := range []*ticketv1.AcquireRequest{
		{Key: "s/b", LeaseMs: 60_000, Owner: "a3"},
		{Key: "s/shared", LeaseMs: 60_000, Owner: "a4", Mode: ticketv1.Mode_MODE_SHARED},
		{Key: "s/sem", LeaseMs: 60_000, Owner: "a5", Limit: 3},
		{Key: "s/b", LeaseMs: 60_000, Owner: "a6", Wait: true},
	} {
		_, err = alice.Acquire(ctx, req)
		requireQuota(t, err, "alice", 2, "locks", "quotas")
	}
	assert.Len(t, mem.Log(), entries, "a refused Acquire proposes nothing")
	assert.Equal(t, 4.0, quotaRefusals(t, in, "locks"))
	assert.Equal(t, 0.0, quotaRefusals(t, in, "watchers"))
	assert.Equal(t, 1.0, metric(t, in, `ticketd_quota_principals_at_limit{kind="locks"}`))
	assert.NotContains(t, metricsText(t, in), `principal="alice"`, "no principal label by default")

	retry, err := alice.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/a", LeaseMs: 60_000, Owner: "a1"})
	require.NoError(t, err, "a retry adds no lock")
	assert.Equal(t, a1.GetToken(), retry.GetToken())

	for _, req := range []*ticketv1.AcquireRequest{
		{Key: "s/b", LeaseMs: 60_000, Owner: "b1"},
		{Key: "s/shared", LeaseMs: 60_000, Owner: "b2", Mode: ticketv1.Mode_MODE_SHARED},
		{Key: "s/sem", LeaseMs: 60_000, Owner: "b3", Limit: 3},
	} {
		_, err = bob.Acquire(ctx, req)
		require.NoError(t, err, "bob is served beside alice at her quota")
	}

	_, err = alice.Release(ctx, &ticketv1.ReleaseRequest{Key: "s/a", Token: a1.GetToken()})
	require.NoError(t, err)
	assert.Equal(t, 0.0, metric(t, in, `ticketd_quota_principals_at_limit{kind="locks"}`))
	sid, err := openSession(ctx, alice)
	require.NoError(t, err)
	_, err = alice.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/sem", Owner: "a7", Limit: 3, Session: sid})
	require.NoError(t, err, "the released lock's place")
	_, err = alice.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/c", Owner: "a8", Session: sid})
	requireQuota(t, err, "alice", 2, "locks", "quotas")

	// Ending the session takes its holder away: a place again.
	_, err = alice.CloseSession(ctx, &ticketv1.CloseSessionRequest{Session: sid})
	require.NoError(t, err)
	_, err = alice.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/c", LeaseMs: 60_000, Owner: "a9"})
	require.NoError(t, err)
}

// TestLockQuotaGrantsInFlight: grants of alice proposed and not yet applied
// count against her quota, so that concurrent Acquires cannot overshoot it:
// with her whole quota in flight the next one is refused at once, and once
// they apply she holds exactly her quota. Bob's grant goes through meanwhile.
func TestLockQuotaGrantsInFlight(t *testing.T) {
	t.Parallel()
	_, mem, alice, bob := quotaNode(t, quotaPolicy)
	ctx := ctxT(t)
	mem.HoldProposals(true)
	out := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := alice.Acquire(ctx, &ticketv1.AcquireRequest{Key: fmt.Sprintf("s/f%d", i), LeaseMs: 60_000, Owner: fmt.Sprintf("f%d", i)})
			out <- err
		}()
	}
	eventually(t, func() bool { return len(mem.Log()) == 2 }, "two grants of alice in flight")
	_, err := alice.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/f2", LeaseMs: 60_000, Owner: "f2"})
	requireQuota(t, err, "alice", 2, "locks", "quotas")
	require.Len(t, mem.Log(), 2, "the refused Acquire proposed nothing")

	bobOut := make(chan error, 1)
	go func() {
		_, err := bob.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/f2", LeaseMs: 60_000, Owner: "b"})
		bobOut <- err
	}()
	eventually(t, func() bool { return len(mem.Log()) == 3 }, "bob's grant proposed beside alice's")
	mem.HoldProposals(false)
	for range 2 {
		require.NoError(t, <-out)
	}
	require.NoError(t, <-bobOut)

	st, err := alice.ListLocks(ctx, &ticketv1.ListLocksRequest{Prefix: "s/"})
	require.NoError(t, err)
	assert.Len(t, st.GetLocks(), 3)
	_, err = alice.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/f3", LeaseMs: 60_000, Owner: "f3"})
	requireQuota(t, err, "alice", 2, "locks", "quotas")
}

// TestLockQuotaConcurrent: on a real three-node cluster of each backend,
// many Acquires of alice at once on distinct keys end with exactly her
// quota granted, every other one refused naming it (grants in flight count:
// the commit latency of a real log lets them overlap); bob is served
// beside her.
func TestLockQuotaConcurrent(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) {
			c := nodetest.Start(t, 3, nodetest.WithBackend(backend),
				nodetest.WithConfig(func(_ int, cfg *config.Config) { withQuotaAuth(t, cfg, quotaPolicy) }),
				nodetest.WithClientOptions(bearer("ops")))
			leader := c.Leader(t)
			alice, bob := lockAs(leader, "alice"), lockAs(leader, "bob")
			ctx := ctxT(t)
			const n = 16
			out := make(chan error, n)
			start := make(chan struct{})
			for i := range n {
				go func() {
					<-start
					_, err := alice.Acquire(ctx, &ticketv1.AcquireRequest{Key: fmt.Sprintf("s/c%d", i), LeaseMs: 60_000, Owner: fmt.Sprintf("c%d", i)})
					out <- err
				}()
			}
			close(start)
			granted := 0
			for range n {
				if err := <-out; err == nil {
					granted++
				} else {
					requireQuota(t, err, "alice", 2, "locks", "quotas")
				}
			}
			assert.Equal(t, 2, granted)
			_, err := bob.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/bob", LeaseMs: 60_000, Owner: "b"})
			require.NoError(t, err, "bob is served beside alice at her quota")
			st, err := alice.ListLocks(ctx, &ticketv1.ListLocksRequest{Prefix: "s/c"})
			require.NoError(t, err)
			assert.Len(t, st.GetLocks(), 2)
		})
	}
}

// TestWaiterQuota: alice's Acquires waiting on the leader count against her
// waiters quota; past it her next waiting Acquire is refused while bob's
// still waits; one that leaves frees its place.
func TestWaiterQuota(t *testing.T) {
	t.Parallel()
	in, _, alice, bob := quotaNode(t, quotaPolicy)
	ctx := ctxT(t)
	carol := lockAs(in, "carol")
	for _, k := range []string{"s/w1", "s/w2", "s/w3"} {
		_, err := carol.Acquire(ctx, &ticketv1.AcquireRequest{Key: k, LeaseMs: 60_000, Owner: "carol"})
		require.NoError(t, err)
	}
	wctx, leave := context.WithCancel(ctx)
	defer leave()
	out := make(chan error, 3)
	for i, k := range []string{"s/w1", "s/w2"} {
		go func() {
			_, err := alice.Acquire(wctx, &ticketv1.AcquireRequest{Key: k, LeaseMs: 60_000, Owner: fmt.Sprintf("aw%d", i), Wait: true})
			out <- err
		}()
	}
	waitWaiters(t, in, 2)
	_, err := alice.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/w3", LeaseMs: 60_000, Owner: "aw3", Wait: true})
	requireQuota(t, err, "alice", 2, "waiters", "quotas")
	assert.Equal(t, 1.0, quotaRefusals(t, in, "waiters"))

	go func() {
		_, err := bob.Acquire(wctx, &ticketv1.AcquireRequest{Key: "s/w3", LeaseMs: 60_000, Owner: "bw", Wait: true})
		out <- err
	}()
	waitWaiters(t, in, 3)

	leave()
	for range 3 {
		requireCode(t, connect.CodeCanceled, <-out)
	}
	waitWaiters(t, in, 0)
	go func() {
		_, err := alice.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/w3", LeaseMs: 60_000, Owner: "aw4", Wait: true})
		out <- err
	}()
	waitWaiters(t, in, 1)
}

// watchAs opens a Watch of in as principal; the stream is closed at the
// end of the test.
func watchAs(t *testing.T, ctx context.Context, in *nodetest.Instance, principal string) (*connect.ServerStreamForClient[ticketv1.WatchEvent], error) {
	c := ticketv1connect.NewLockServiceClient(nodetest.H2CClient(), "http://"+in.Addr, bearer(principal))
	s, err := c.Watch(ctx, &ticketv1.WatchRequest{Prefix: "s/"})
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	return s, err
}

// watchErr returns the error a Watch stream ends with (the server's
// refusal comes with the response headers or as the end of the stream).
func watchErr(s *connect.ServerStreamForClient[ticketv1.WatchEvent], err error) error {
	if err != nil {
		return err
	}
	for s.Receive() {
	}
	return s.Err()
}

// TestWatcherQuota: alice's open Watch streams count against her watchers
// quota; past it her next Watch is refused while bob's is opened; a closed
// stream frees its place.
func TestWatcherQuota(t *testing.T) {
	t.Parallel()
	in, _, _, _ := quotaNode(t, quotaPolicy)
	ctx := ctxT(t)
	first, err := watchAs(t, ctx, in, "alice")
	require.NoError(t, err)
	_, err = watchAs(t, ctx, in, "alice")
	require.NoError(t, err)
	eventually(t, func() bool { return metric(t, in, "ticketd_watchers") == 2 }, "two watchers")

	err = watchErr(watchAs(t, ctx, in, "alice"))
	requireQuota(t, err, "alice", 2, "watchers", "quotas")
	assert.Equal(t, 1.0, quotaRefusals(t, in, "watchers"))

	_, err = watchAs(t, ctx, in, "bob")
	require.NoError(t, err)
	eventually(t, func() bool { return metric(t, in, "ticketd_watchers") == 3 }, "bob watches beside alice at her quota")

	require.NoError(t, first.Close())
	eventually(t, func() bool { return metric(t, in, "ticketd_watchers") == 2 }, "alice's first watch closed")
	_, err = watchAs(t, ctx, in, "alice")
	require.NoError(t, err)
	eventually(t, func() bool { return metric(t, in, "ticketd_watchers") == 3 }, "a place again")
}

// TestSessionQuota: alice's sessions count against her sessions quota, and
// bob's against default_quota, each refusal naming the key it comes from.
func TestSessionQuota(t *testing.T) {
	t.Parallel()
	in, _, alice, bob := quotaNode(t, quotaPolicy+"  - {principal: bob, locks: 5}\n"+
		"  - {principal: carol, sessions: 0}\n")
	ctx := ctxT(t)
	for range 2 {
		_, err := openSession(ctx, alice)
		require.NoError(t, err)
	}
	_, err := openSession(ctx, alice)
	requireQuota(t, err, "alice", 2, "sessions", "quotas")
	assert.Equal(t, 1.0, quotaRefusals(t, in, "sessions"))
	_, err = openSession(ctx, bob)
	require.NoError(t, err, "bob is served beside alice at her quota")
	_, err = openSession(ctx, lockAs(in, "carol"))
	require.NoError(t, err, "sessions: 0 lifts the default")
}

// TestSessionQuotaFromDefault: a principal without its own quota gets
// default_quota's, and the refusal says so.
func TestSessionQuotaFromDefault(t *testing.T) {
	t.Parallel()
	in, _, alice, bob := quotaNode(t, sessionPolicy+"default_quota: {sessions: 1}\n")
	ctx := ctxT(t)
	_, err := openSession(ctx, bob)
	require.NoError(t, err)
	_, err = openSession(ctx, bob)
	requireQuota(t, err, "bob", 1, "sessions", "default_quota")
	_, err = openSession(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, 1.0, quotaRefusals(t, in, "sessions"))
}

// TestQuotaReload: a SIGHUP reloads the policy's quotas with it: a larger
// quota admits the next Acquire, a smaller one refuses it. (A policy whose
// quotas do not parse is refused on reload like any bad policy: e2e.)
func TestQuotaReload(t *testing.T) {
	t.Parallel()
	// Keep the process alive whatever the order of signal handlers: the
	// node's reload loop notifies on its own channel beside this one.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	var policyFile string
	in, _ := memNode(t, withConfig(func(c *config.Config) { policyFile = withQuotaAuth(t, c, quotaPolicy) }),
		nodetest.WithClientOptions(bearer("ops")))
	alice := lockAs(in, "alice")
	ctx := ctxT(t)
	for i := range 2 {
		_, err := alice.Acquire(ctx, &ticketv1.AcquireRequest{Key: fmt.Sprintf("s/r%d", i), LeaseMs: 60_000, Owner: "r"})
		require.NoError(t, err)
	}
	_, err := alice.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/r2", LeaseMs: 60_000, Owner: "r"})
	requireQuota(t, err, "alice", 2, "locks", "quotas")

	reload := func(policy string) {
		require.NoError(t, os.WriteFile(policyFile, []byte(policy), 0o600))
		require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	}
	reload(sessionPolicy + "quotas: [{principal: alice, locks: 3}]\n")
	eventually(t, func() bool {
		_, err := alice.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/r2", LeaseMs: 60_000, Owner: "r"})
		return err == nil
	}, "the reloaded quota of 3 admits a third lock")
	_, err = alice.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/r3", LeaseMs: 60_000, Owner: "r"})
	requireQuota(t, err, "alice", 3, "locks", "quotas")

	reload(sessionPolicy + "default_quota: {locks: 1}\n")
	eventually(t, func() bool {
		_, err := alice.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/r3", LeaseMs: 60_000, Owner: "r"})
		return connect.CodeOf(err) == connect.CodeResourceExhausted &&
			strings.Contains(err.Error(), "principal alice is at its quota of 1 locks (policy default_quota)")
	}, "the smaller default applies to alice, who has no entry now")
}

// metricsText is a node's whole /metrics page.
func metricsText(t *testing.T, in *nodetest.Instance) string {
	t.Helper()
	res, err := http.Get("http://" + in.Addr + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(b)
}

// TestQuotaMetricsPrincipalLabels: with metrics_principal_labels the
// refusals and the usage carry the principal.
func TestQuotaMetricsPrincipalLabels(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t, withConfig(func(c *config.Config) {
		withQuotaAuth(t, c, quotaPolicy)
		c.MetricsPrincipalLabels = true
	}), nodetest.WithClientOptions(bearer("ops")))
	alice, bob := lockAs(in, "alice"), lockAs(in, "bob")
	ctx := ctxT(t)
	for i := range 3 {
		_, err := alice.Acquire(ctx, &ticketv1.AcquireRequest{Key: fmt.Sprintf("s/m%d", i), LeaseMs: 60_000, Owner: "m"})
		if i < 2 {
			require.NoError(t, err)
		} else {
			requireQuota(t, err, "alice", 2, "locks", "quotas")
		}
	}
	_, err := bob.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/b", LeaseMs: 60_000, Owner: "b"})
	require.NoError(t, err)
	assert.Equal(t, 1.0, metric(t, in, `ticketd_quota_refusals_total{kind="locks",principal="alice"}`))
	assert.Equal(t, 2.0, metric(t, in, `ticketd_quota_used{kind="locks",principal="alice"}`))
	assert.Equal(t, 1.0, metric(t, in, `ticketd_quota_used{kind="locks",principal="bob"}`))
	assert.Equal(t, 1.0, metric(t, in, `ticketd_quota_principals_at_limit{kind="locks"}`))
}
