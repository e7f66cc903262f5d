package e2e_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// quotaPolicyE2E is authPolicy with a small quota of every kind for alice
// (client certificate) and a default for everyone else (bob, by token).
const quotaPolicyE2E = authPolicy + `
default_quota: {locks: 100, sessions: 100, watchers: 100, waiters: 100}
quotas:
  - {principal: alice, locks: 2, sessions: 1, watchers: 1, waiters: 1}
`

// requireQuotaE2E checks that err is ResourceExhausted naming alice's
// quota of limit kind.
func requireQuotaE2E(t *testing.T, err error, limit int, kind string) {
	t.Helper()
	requireCode(t, connect.CodeResourceExhausted, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("principal alice is at its quota of %d %s (policy quotas)", limit, kind))
}

// watchErrE2E opens a Watch of shared/ with lc and returns nil once it is
// in place (the stream stays open until ctx ends), or the error it ended
// with.
func watchErrE2E(ctx context.Context, lc ticketv1connect.LockServiceClient) error {
	s, err := lc.Watch(ctx, &ticketv1.WatchRequest{Prefix: "shared/"})
	if err != nil {
		return err
	}
	// The refusal comes as the end of the stream; an admitted watch sends
	// nothing until a change: look for an end without waiting for one.
	done := make(chan error, 1)
	go func() {
		for s.Receive() {
		}
		done <- s.Err()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return nil
	}
}

// TestPrincipalQuotas: on real three-node clusters of both backends with
// peer mutual TLS and authorization, alice at her quota of locks (counted
// cluster-wide, whichever node she calls), sessions, watchers (per node)
// and waiters gets ResourceExhausted naming the quota while bob is served;
// a SIGHUP with a larger quota admits her next lock, and a policy whose
// quotas are malformed is refused on reload, the previous quotas staying.
func TestPrincipalQuotas(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		dir := makeCerts(t, 3, "e2e", "alice")
		policyFile, authArgs := writeAuthFiles(t, dir, quotaPolicyE2E)
		c := ticketdtest.Start(t, ticketdtest.Options{
			Backend: backend,
			Args:    append([]string{"--lease-min-ms=10", "--lease-max-ms=120000"}, authArgs...),
			TLS:     &ticketdtest.TLS{CertsDir: dir, Peer: true, Client: "e2e"},
		})
		settle(t, c)
		ctx := ctxT(t)
		leader, f := c.Leader(t), follower(t, c)
		alice := clientsAs(t, c, dir, identity{cert: "alice"})
		bob := clientsAs(t, c, dir, identity{token: bobToken})

		// Waiters: alice waits for bob's lock; her second waiter is refused,
		// bob's own waiter queues.
		_, err := bob.lock[f].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/b", LeaseMs: 60_000, Owner: "bob"})
		require.NoError(t, err)
		waitCtx, leave := context.WithCancel(ctx)
		defer leave()
		out := make(chan error, 2)
		go func() {
			_, err := alice.lock[0].Acquire(waitCtx, &ticketv1.AcquireRequest{Key: "shared/b", LeaseMs: 60_000, Owner: "alice-w", Wait: true})
			out <- err
		}()
		waitWaiters(t, c, leader, 1)
		_, err = alice.lock[f].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/b", LeaseMs: 60_000, Owner: "alice-w2", Wait: true})
		requireQuotaE2E(t, err, 1, "waiters")
		go func() {
			_, err := bob.lock[f].Acquire(waitCtx, &ticketv1.AcquireRequest{Key: "shared/b", LeaseMs: 60_000, Owner: "bob-w", Wait: true})
			out <- err
		}()
		waitWaiters(t, c, leader, 2)
		leave()
		for range 2 {
			requireCode(t, connect.CodeCanceled, <-out)
		}

		// Locks: counted cluster-wide, through a follower too.
		for i, node := range []int{f, leader} {
			_, err := alice.lock[node].Acquire(ctx, &ticketv1.AcquireRequest{Key: fmt.Sprintf("shared/a%d", i), LeaseMs: 60_000, Owner: "alice"})
			require.NoError(t, err)
		}
		for i := range c.Len() {
			_, err := alice.lock[i].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/a2", LeaseMs: 60_000, Owner: "alice"})
			requireQuotaE2E(t, err, 2, "locks")
		}
		_, err = bob.lock[f].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/b2", LeaseMs: 60_000, Owner: "bob"})
		require.NoError(t, err, "bob's Acquire succeeds beside alice at her quota")
		assert.Equal(t, float64(c.Len()), metric(t, c, leader, `ticketd_quota_refusals_total{kind="locks"}`),
			"counted on the leader, which decided")

		// Sessions: cluster-wide too.
		_, err = alice.lock[f].CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 60_000})
		require.NoError(t, err)
		_, err = alice.lock[leader].CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 60_000})
		requireQuotaE2E(t, err, 1, "sessions")
		_, err = bob.lock[f].CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 60_000})
		require.NoError(t, err)

		// Watchers: per node.
		aliceF, _ := streamClientsOf(t, c, dir, f, identity{cert: "alice"})
		aliceL, _ := streamClientsOf(t, c, dir, leader, identity{cert: "alice"})
		bobF, _ := streamClientsOf(t, c, dir, f, identity{token: bobToken})
		wctx, endWatches := context.WithCancel(ctx)
		defer endWatches()
		opened := func(lc ticketv1connect.LockServiceClient) {
			s, err := lc.Watch(wctx, &ticketv1.WatchRequest{Prefix: "shared/"})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
		}
		opened(aliceF)
		eventually(t, func() bool { return metric(t, c, f, "ticketd_watchers") == 1 }, "alice's watch on the follower")
		probe, cancelProbe := context.WithCancel(ctx)
		refused := make(chan error, 1)
		go func() { refused <- watchErrE2E(probe, aliceF) }()
		eventually(t, func() bool { return metric(t, c, f, `ticketd_quota_refusals_total{kind="watchers"}`) == 1 }, "the second watch refused")
		err = <-refused
		cancelProbe()
		requireQuotaE2E(t, err, 1, "watchers")
		opened(aliceL) // another node: its own count
		opened(bobF)
		eventually(t, func() bool { return metric(t, c, f, "ticketd_watchers") == 2 }, "bob watches beside alice at her quota")

		// Reload: a larger lock quota admits alice's third lock.
		hangup := func() {
			for i := range c.Len() {
				require.NoError(t, syscall.Kill(c.Node(i).PID(), syscall.SIGHUP))
			}
		}
		logged := func(msg string) int {
			n := 0
			for i := range c.Len() {
				b, err := os.ReadFile(c.Node(i).LogFile)
				require.NoError(t, err)
				n += strings.Count(string(b), `"msg":"`+msg+`"`)
			}
			return n
		}
		larger := strings.Replace(quotaPolicyE2E, "locks: 2,", "locks: 3,", 1)
		require.NoError(t, os.WriteFile(policyFile, []byte(larger), 0o600))
		hangup()
		eventually(t, func() bool { return logged("policy reloaded") == c.Len() }, "every node reloads the policy")
		_, err = alice.lock[f].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/a2", LeaseMs: 60_000, Owner: "alice"})
		require.NoError(t, err, "the reloaded quota of 3 admits a third lock")

		require.NoError(t, os.WriteFile(policyFile, []byte(authPolicy+"quotas: [{principal: alice, locks: -1}]\n"), 0o600))
		hangup()
		eventually(t, func() bool { return logged("policy reload failed; keeping the previous policy and tokens") == c.Len() },
			"every node refuses the malformed quota")
		require.Len(t, c.Running(), c.Len(), "a malformed quota does not stop a node")
		_, err = alice.lock[leader].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/a3", LeaseMs: 60_000, Owner: "alice"})
		requireQuotaE2E(t, err, 3, "locks")
	})
}
