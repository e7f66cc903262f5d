package server_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// renewalsInFlight is the server's maxRenewalEntries: renewal entries
// proposed on their own before renewals wait to share one.
const renewalsInFlight = 4

// renewalFixture creates renewalsInFlight+3 sessions (10 s TTL) and takes
// two locks, prefix+"0" and prefix+"1" (20 s leases), on in: more renewals
// than the leader keeps in flight, of both kinds. It returns the session ids
// and the two locks' tokens.
func renewalFixture(ctx context.Context, t *testing.T, in *nodetest.Instance, prefix string) (sessions, tokens []uint64) {
	t.Helper()
	for range renewalsInFlight + 3 {
		sessions = append(sessions, createSession(t, in, 10_000))
	}
	for i := range 2 {
		res, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: fmt.Sprintf("%s%d", prefix, i), LeaseMs: 20_000})
		require.NoError(t, err)
		tokens = append(tokens, res.GetToken())
	}
	return sessions, tokens
}

// TestRenewalsShareEntries: with as many renewal entries in flight as the
// leader keeps, KeepAlives of other sessions and Renews of other locks
// wait, and are written together as one RenewBatch entry once an entry in
// flight is answered: each is answered with its own outcome, the apply
// hook sees each as the KeepAliveSession or Renew it stands for at the
// batch's index, and Watch reports each lock's renewal. Without the batch
// they would be five entries.
func TestRenewalsShareEntries(t *testing.T) {
	t.Parallel()
	in, mem := memNode(t)
	ctx := ctxT(t)
	eventually(t, func() bool { return metric(t, in, "ticketd_cluster_command_version") == 4 }, "the lone member applies version 4")
	sessions, tokens := renewalFixture(ctx, t, in, "rb/")
	events := watchEvents(t, in, "rb/")

	type applied struct {
		index uint64
		cmd   core.Command
	}
	var mu sync.Mutex
	var seen []applied
	mem.SetApplyHook(func(index uint64, cmd core.Command, res core.Result) {
		if res.Outcome == core.OutcomeRenewed {
			mu.Lock()
			seen = append(seen, applied{index, cmd})
			mu.Unlock()
		}
	})

	mem.HoldProposals(true)
	out := make(chan error, len(sessions)+len(tokens))
	keepAlive := func(id uint64) {
		res, err := in.Lock.KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: id})
		if err == nil && res.GetTtlMs() != 10_000 {
			err = fmt.Errorf("session %d: ttl %d", id, res.GetTtlMs())
		}
		out <- err
	}
	for _, id := range sessions[:renewalsInFlight] {
		go keepAlive(id)
	}
	eventually(t, func() bool { return len(mem.Log()) == renewalsInFlight }, "the first KeepAlives in flight, each in its own entry")

	for _, id := range sessions[renewalsInFlight:] {
		go keepAlive(id)
	}
	for i, tok := range tokens {
		go func() {
			res, err := in.Lock.Renew(ctx, &ticketv1.RenewRequest{Key: fmt.Sprintf("rb/%d", i), Token: tok})
			if err == nil && res.GetLeaseMs() != 20_000 {
				err = fmt.Errorf("renew rb/%d: lease %d", i, res.GetLeaseMs())
			}
			out <- err
		}()
	}
	waiting := len(sessions) - renewalsInFlight + len(tokens)
	eventually(t, func() bool { return metric(t, in, "ticketd_renewals_waiting") == float64(waiting) }, "the other renewals waiting")
	require.Len(t, mem.Log(), renewalsInFlight, "no entry of their own")

	mem.Commit(1)
	mem.Apply(1)
	eventually(t, func() bool { return len(mem.Log()) == renewalsInFlight }, "the batch in flight")
	batch := mem.Log()[renewalsInFlight-1].Cmd
	require.Equal(t, core.OpRenewBatch, batch.Op)
	assert.ElementsMatch(t, sessions[renewalsInFlight:], batch.Batch.Sessions)
	assert.ElementsMatch(t, []core.LockRef{{Key: "rb/0", Token: tokens[0]}, {Key: "rb/1", Token: tokens[1]}}, batch.Batch.Locks)

	mem.HoldProposals(false)
	for range cap(out) {
		require.NoError(t, <-out)
	}
	assert.Equal(t, float64(waiting), metric(t, in, "ticketd_renewals_batched_total"))
	assert.Zero(t, metric(t, in, "ticketd_renewals_waiting"))

	// The hook saw the batch's renewals one by one, all at one index.
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, len(sessions)+len(tokens))
	batchIndex := seen[len(seen)-1].index
	var inBatch []core.Command
	for _, a := range seen {
		if a.index == batchIndex {
			inBatch = append(inBatch, a.cmd)
		}
	}
	want := []core.Command{core.Renew("rb/0", tokens[0]), core.Renew("rb/1", tokens[1])}
	for _, id := range sessions[renewalsInFlight:] {
		want = append(want, core.KeepAliveSession(id))
	}
	assert.ElementsMatch(t, want, inBatch)

	var renewed []string
	for _, ev := range events(2) {
		assert.Equal(t, ticketv1.WatchEvent_TYPE_RENEWED, ev.GetType())
		assert.Equal(t, batchIndex, ev.GetIndex())
		renewed = append(renewed, fmt.Sprintf("%s %d", ev.GetKey(), ev.GetToken()))
	}
	assert.ElementsMatch(t, []string{fmt.Sprintf("rb/0 %d", tokens[0]), fmt.Sprintf("rb/1 %d", tokens[1])}, renewed)
}

// TestRenewBatchOnCluster: on a three-node cluster, many clients keeping
// sessions alive and renewing locks at once make the leader write
// RenewBatch entries, every call succeeds, and a follower, applying them,
// reports every lock renewal on Watch: one RENEWED event per Renew
// answered, whether its entry was shared or not.
func TestRenewBatchOnCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("three-node cluster")
	}
	// A buffer that a watcher in this busy process never overruns; and a
	// leader that stays one for the whole test (every renewal goes to it
	// and must succeed): on a loaded machine the default 400 ms election
	// timeout can pass between two heartbeats of three nodes sharing the
	// CPU with the clients.
	c := nodetest.Start(t, 3, nodetest.WithConfig(func(_ int, c *config.Config) {
		c.Limits.WatchBufferEvents = 1 << 16
		c.Raft.HeartbeatMS, c.Raft.ElectionTimeoutMS = 200, 5000
	}))
	leader, follower := c.Leader(t), c.Follower(t)
	ctx := ctxT(t)
	const clients = 12
	var sessions, tokens []uint64
	for i := range clients {
		sessions = append(sessions, createSession(t, leader, 30_000))
		acquireUnder(t, leader, fmt.Sprintf("rbs/%d", i), sessions[i])
		res, err := leader.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: fmt.Sprintf("rbc/%d", i), LeaseMs: 30_000})
		require.NoError(t, err)
		tokens = append(tokens, res.GetToken())
	}

	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	stream, err := follower.Lock.Watch(wctx, &ticketv1.WatchRequest{Prefix: "rbc/"})
	require.NoError(t, err)
	receiveStarted(t, stream)
	var events atomic.Int64
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for stream.Receive() {
			if stream.Msg().GetType() == ticketv1.WatchEvent_TYPE_RENEWED {
				events.Add(1)
			}
		}
	}()

	var renews, failed atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if _, err := leader.Lock.KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: sessions[i]}); err != nil {
					failed.Add(1)
					t.Errorf("keep-alive of session %d: %v", sessions[i], err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if _, err := leader.Lock.Renew(ctx, &ticketv1.RenewRequest{Key: fmt.Sprintf("rbc/%d", i), Token: tokens[i]}); err != nil {
					failed.Add(1)
					t.Errorf("renew rbc/%d: %v", i, err)
					return
				}
				renews.Add(1)
			}
		}()
	}
	eventually(t, func() bool {
		return failed.Load() > 0 || metric(t, leader, "ticketd_renewals_batched_total") > 0
	}, "renewals written together")
	stop.Store(true)
	wg.Wait()
	require.Zero(t, failed.Load())
	eventually(t, func() bool { return events.Load() == renews.Load() }, "a RENEWED event on the follower for every Renew answered")
	stopWatch()
	<-watched
	assert.Equal(t, renews.Load(), events.Load())
}
