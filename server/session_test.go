package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/fakeclock"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// watchEvents opens a Watch on in from now, waits for its announced start,
// and returns a function that receives the next n events.
func watchEvents(t *testing.T, in *nodetest.Instance, prefix string) func(n int) []*ticketv1.WatchEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(ctxT(t))
	stream, err := in.Lock.Watch(ctx, &ticketv1.WatchRequest{Prefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() {
		cancel()
		_ = stream.Close()
	})
	receiveStarted(t, stream)
	return func(n int) []*ticketv1.WatchEvent {
		t.Helper()
		var out []*ticketv1.WatchEvent
		for len(out) < n {
			require.True(t, stream.Receive(), "watch: %v", stream.Err())
			out = append(out, stream.Msg())
		}
		return out
	}
}

// describe renders events as "TYPE key token session" lines and returns the
// set of their indexes.
func describe(evs []*ticketv1.WatchEvent) ([]string, map[uint64]bool) {
	var lines []string
	idx := map[uint64]bool{}
	for _, ev := range evs {
		lines = append(lines, fmt.Sprintf("%s %s %d s%d", ev.GetType(), ev.GetKey(), ev.GetToken(), ev.GetSession()))
		idx[ev.GetIndex()] = true
	}
	return lines, idx
}

func createSession(t *testing.T, in *nodetest.Instance, ttlMS int64) uint64 {
	t.Helper()
	res, err := in.Lock.CreateSession(ctxT(t), &ticketv1.CreateSessionRequest{TtlMs: ttlMS})
	require.NoError(t, err)
	require.NotZero(t, res.GetSession())
	require.Equal(t, ttlMS, res.GetTtlMs())
	return res.GetSession()
}

func acquireUnder(t *testing.T, in *nodetest.Instance, key string, session uint64) *ticketv1.AcquireResponse {
	t.Helper()
	res, err := in.Lock.Acquire(ctxT(t), &ticketv1.AcquireRequest{Key: key, Owner: key, Session: session})
	require.NoError(t, err)
	require.Equal(t, session, res.GetSession())
	return res
}

// TestSessionKeepAliveAndExpiry: two locks under one session; one KeepAlive
// restarts both leases; Renew of either is FailedPrecondition; when the
// session is no longer kept alive both are removed in one entry (EXPIRED
// events at one index) and the waiters on both keys get them
// (docs/design.md#sessions).
func TestSessionKeepAliveAndExpiry(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New()
	in, _ := memNodeWith(t, []server.Option{server.WithClock(clock)})
	ctx := ctxT(t)
	next := watchEvents(t, in, "s/")

	id := createSession(t, in, 1000)
	a := acquireUnder(t, in, "s/a", id)
	b := acquireUnder(t, in, "s/b", id)
	assert.Equal(t, int64(1000), a.GetLeaseMs(), "a lock under a session has the session's TTL")
	granted, _ := describe(next(2))
	assert.Equal(t, []string{
		fmt.Sprintf("TYPE_GRANTED s/a %d s%d", a.GetToken(), id),
		fmt.Sprintf("TYPE_GRANTED s/b %d s%d", b.GetToken(), id),
	}, granted)

	out := make(chan acquired, 2)
	acquireAsync(ctx, in, "wa", &ticketv1.AcquireRequest{Key: "s/a", LeaseMs: 5000, Owner: "wa", Wait: true}, out)
	acquireAsync(ctx, in, "wb", &ticketv1.AcquireRequest{Key: "s/b", LeaseMs: 5000, Owner: "wb", Wait: true}, out)
	waitWaiters(t, in, 2)

	clock.Advance(600 * time.Millisecond)
	assert.Equal(t, int64(400), held(t, in, "s/a").GetRemainingMs())
	ka, err := in.Lock.KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: id})
	require.NoError(t, err)
	assert.Equal(t, int64(1000), ka.GetTtlMs())
	for _, key := range []string{"s/a", "s/b"} {
		got := held(t, in, key)
		assert.Equal(t, int64(1000), got.GetRemainingMs(), "%s: the one KeepAlive restarted it", key)
		require.Len(t, got.GetHolders(), 1)
		assert.Equal(t, id, got.GetHolders()[0].GetSession())
	}

	_, err = in.Lock.Renew(ctx, &ticketv1.RenewRequest{Key: "s/a", Token: a.GetToken()})
	requireCode(t, connect.CodeFailedPrecondition, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("session %d", id))

	clock.Advance(999 * time.Millisecond)
	assert.Equal(t, a.GetToken(), held(t, in, "s/a").GetToken(), "held until the session's lease is over")
	clock.Advance(time.Millisecond)

	lines, idx := describe(next(2))
	assert.Equal(t, []string{
		fmt.Sprintf("TYPE_EXPIRED s/a %d s%d", a.GetToken(), id),
		fmt.Sprintf("TYPE_EXPIRED s/b %d s%d", b.GetToken(), id),
	}, lines, "one EXPIRED event per holder")
	assert.Len(t, idx, 1, "one entry ended the session and both its locks")
	got := map[string]uint64{}
	for range 2 {
		w := recvAcquired(t, out)
		require.NoError(t, w.err, w.name)
		got[w.name] = w.res.GetToken()
	}
	assert.Len(t, got, 2, "both waiters were granted")

	_, err = in.Lock.KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: id})
	requireCode(t, connect.CodeNotFound, err)
	_, err = in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/c", Owner: "c", Session: id})
	requireCode(t, connect.CodeNotFound, err)
}

// TestExpiringSessionInvalidatesItsLocks: once a session's lease has run
// out and its ExpireSession is proposed but not yet applied, the locks under
// it are no longer valid (CheckToken) and the session cannot be kept alive;
// the entry then removes them.
func TestExpiringSessionInvalidatesItsLocks(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New()
	in, mem := memNodeWith(t, []server.Option{server.WithClock(clock)})
	ctx := ctxT(t)
	id := createSession(t, in, 1000)
	a := acquireUnder(t, in, "e/a", id)
	res, err := in.Lock.CheckToken(ctx, &ticketv1.CheckTokenRequest{Key: "e/a", Token: a.GetToken()})
	require.NoError(t, err)
	require.True(t, res.GetValid())

	mem.HoldProposals(true)
	clock.Advance(time.Second)
	eventually(t, func() bool {
		for _, e := range mem.Log() {
			if e.Cmd.Op == core.OpExpireSession && e.Cmd.Session == id {
				return true
			}
		}
		return false
	}, "the lessor proposes the session's expiry")
	res, err = in.Lock.CheckToken(ctx, &ticketv1.CheckTokenRequest{Key: "e/a", Token: a.GetToken()})
	require.NoError(t, err)
	assert.False(t, res.GetValid(), "a lock under an expiring session is invalid")
	assert.Equal(t, a.GetToken(), res.GetCurrentToken(), "still in the table")
	_, err = in.Lock.KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: id})
	requireCode(t, connect.CodeNotFound, err)

	mem.HoldProposals(false)
	eventually(t, func() bool { return !held(t, in, "e/a").GetHeld() }, "the ExpireSession applies")
}

// TestCloseSessionReleasesAll: CloseSession releases every lock under the
// session in one entry (RELEASED events at one index); a lock under a
// session may be released on its own first.
func TestCloseSessionReleasesAll(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t)
	ctx := ctxT(t)
	id := createSession(t, in, 5000)
	a := acquireUnder(t, in, "c/a", id)
	b := acquireUnder(t, in, "c/b", id)
	c := acquireUnder(t, in, "c/c", id)
	_, err := in.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "c/c", Token: c.GetToken()})
	require.NoError(t, err, "a lock under a session is released on its own")

	existing, err := in.Lock.Watch(ctx, &ticketv1.WatchRequest{Prefix: "c/", IncludeExisting: true})
	require.NoError(t, err)
	for _, want := range []uint64{a.GetToken(), b.GetToken()} {
		require.True(t, existing.Receive(), "watch: %v", existing.Err())
		ev := existing.Msg()
		assert.True(t, ev.GetExisting())
		assert.Equal(t, want, ev.GetToken())
		assert.Equal(t, id, ev.GetSession(), "include_existing events carry the session")
	}
	require.NoError(t, existing.Close())

	next := watchEvents(t, in, "c/")
	_, err = in.Lock.CloseSession(ctx, &ticketv1.CloseSessionRequest{Session: id})
	require.NoError(t, err)
	evs := next(2)
	lines, idx := describe(evs)
	assert.Equal(t, []string{
		fmt.Sprintf("TYPE_RELEASED c/a %d s%d", a.GetToken(), id),
		fmt.Sprintf("TYPE_RELEASED c/b %d s%d", b.GetToken(), id),
	}, lines)
	assert.Len(t, idx, 1, "one entry ended the session")
	for _, key := range []string{"c/a", "c/b", "c/c"} {
		assert.False(t, held(t, in, key).GetHeld(), key)
	}
	_, err = in.Lock.CloseSession(ctx, &ticketv1.CloseSessionRequest{Session: id})
	requireCode(t, connect.CodeNotFound, err)
	_, err = in.Lock.KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: id})
	requireCode(t, connect.CodeNotFound, err)
}

// TestSessionRefusals: bad input is InvalidArgument and changes nothing;
// unknown sessions are NotFound; limits.max_sessions is ResourceExhausted.
func TestSessionRefusals(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t, withConfig(func(c *config.Config) { c.Limits.MaxSessions = 2 }))
	ctx := ctxT(t)
	before := state(t, in)
	_, err := in.Lock.CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 0})
	requireCode(t, connect.CodeInvalidArgument, err)
	assert.Equal(t, "ttl_ms", err.(*connect.Error).Meta().Get(server.InvalidFieldHeader))
	_, err = in.Lock.CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: in.Config.Lease.MaxMS + 1})
	requireCode(t, connect.CodeInvalidArgument, err)
	_, err = in.Lock.KeepAlive(ctx, &ticketv1.KeepAliveRequest{})
	requireCode(t, connect.CodeInvalidArgument, err)
	_, err = in.Lock.CloseSession(ctx, &ticketv1.CloseSessionRequest{})
	requireCode(t, connect.CodeInvalidArgument, err)
	_, err = in.Lock.KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: 999})
	requireCode(t, connect.CodeNotFound, err)
	_, err = in.Lock.CloseSession(ctx, &ticketv1.CloseSessionRequest{Session: 999})
	requireCode(t, connect.CodeNotFound, err)
	assert.Equal(t, before, state(t, in), "refusals change nothing")

	createSession(t, in, 1000)
	createSession(t, in, 1000)
	_, err = in.Lock.CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 1000})
	requireCode(t, connect.CodeResourceExhausted, err)
}

// TestSharedHoldersReads: GetLock, ListLocks and CheckToken with several
// holders per key (shared locks and a semaphore): every holder in token
// order, the singular fields only for an exclusive lock, CheckToken valid
// per holder with the newest token as current_token; force release ends
// every holder of the key.
func TestSharedHoldersReads(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t)
	ctx := ctxT(t)
	acq := func(req *ticketv1.AcquireRequest) uint64 {
		t.Helper()
		req.LeaseMs = 5000
		res, err := in.Lock.Acquire(ctx, req)
		require.NoError(t, err)
		return res.GetToken()
	}
	r1 := acq(&ticketv1.AcquireRequest{Key: "r/data", Owner: "r1", Mode: ticketv1.Mode_MODE_SHARED})
	r2 := acq(&ticketv1.AcquireRequest{Key: "r/data", Owner: "r2", Mode: ticketv1.Mode_MODE_SHARED})
	s1 := acq(&ticketv1.AcquireRequest{Key: "r/sem", Owner: "s1", Limit: 3})
	s2 := acq(&ticketv1.AcquireRequest{Key: "r/sem", Owner: "s2", Limit: 3})
	x := acq(&ticketv1.AcquireRequest{Key: "r/x", Owner: "x"})

	shared := held(t, in, "r/data")
	assert.True(t, shared.GetHeld())
	assert.Equal(t, ticketv1.Mode_MODE_SHARED, shared.GetMode())
	assert.Zero(t, shared.GetToken(), "no singular holder for a shared key")
	assert.Empty(t, shared.GetOwner())
	require.Len(t, shared.GetHolders(), 2)
	assert.Equal(t, []uint64{r1, r2}, []uint64{shared.GetHolders()[0].GetToken(), shared.GetHolders()[1].GetToken()})
	assert.Equal(t, "r2", shared.GetHolders()[1].GetOwner())
	assert.Equal(t, int64(5000), shared.GetHolders()[1].GetLeaseMs())

	sem := held(t, in, "r/sem")
	assert.Equal(t, uint32(3), sem.GetLimit())
	assert.Equal(t, ticketv1.Mode_MODE_EXCLUSIVE, sem.GetMode())
	assert.Zero(t, sem.GetToken(), "no singular holder for a semaphore")
	require.Len(t, sem.GetHolders(), 2)

	ex := held(t, in, "r/x")
	assert.Equal(t, x, ex.GetToken(), "an exclusive lock keeps its singular fields")
	assert.Equal(t, "x", ex.GetOwner())
	assert.Equal(t, int64(5000), ex.GetLeaseMs())
	require.Len(t, ex.GetHolders(), 1)
	assert.Equal(t, x, ex.GetHolders()[0].GetToken())

	check := func(key string, token uint64) *ticketv1.CheckTokenResponse {
		t.Helper()
		res, err := in.Lock.CheckToken(ctx, &ticketv1.CheckTokenRequest{Key: key, Token: token})
		require.NoError(t, err)
		return res
	}
	for _, tok := range []uint64{r1, r2} {
		res := check("r/data", tok)
		assert.True(t, res.GetValid(), "shared holder %d", tok)
		assert.Equal(t, r2, res.GetCurrentToken(), "the newest holder")
		assert.Equal(t, ticketv1.Mode_MODE_SHARED, res.GetMode())
	}
	assert.False(t, check("r/data", s1).GetValid(), "a token of another key")
	res := check("r/sem", s1)
	assert.True(t, res.GetValid())
	assert.Equal(t, s2, res.GetCurrentToken())
	assert.Equal(t, uint32(3), res.GetLimit())

	var keys []string
	var holders []int
	var page string
	for {
		ls, err := in.Lock.ListLocks(ctx, &ticketv1.ListLocksRequest{Prefix: "r/", PageSize: 1, PageToken: page})
		require.NoError(t, err)
		for _, l := range ls.GetLocks() {
			keys = append(keys, l.GetKey())
			holders = append(holders, len(l.GetHolders()))
		}
		if page = ls.GetNextPageToken(); page == "" {
			break
		}
	}
	assert.Equal(t, []string{"r/data", "r/sem", "r/x"}, keys, "one Lock per key, paged by key")
	assert.Equal(t, []int{2, 2, 1}, holders)
	ls, err := in.Lock.ListLocks(ctx, &ticketv1.ListLocksRequest{Prefix: "r/x"})
	require.NoError(t, err)
	require.Len(t, ls.GetLocks(), 1)
	assert.Equal(t, x, ls.GetLocks()[0].GetToken())

	_, err = in.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "r/data", Token: r1})
	require.NoError(t, err, "one shared holder releases")
	assert.False(t, check("r/data", r1).GetValid())
	assert.True(t, check("r/data", r2).GetValid())
	_, err = in.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "r/data", Token: r1})
	requireCode(t, connect.CodeNotFound, err)

	_, err = in.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "r/sem", Force: true})
	require.NoError(t, err)
	assert.False(t, held(t, in, "r/sem").GetHeld(), "force release ends every holder")
}

// TestSessionAcrossFailover: on a real three-node cluster of each backend, a
// session and the locks under it survive the leader's loss with the lease
// every node measured from its own apply (no fresh TTL at promotion), the
// new leader accepts its KeepAlive, and once it is no longer kept alive the
// new leader's lessor ends it, releasing its locks.
func TestSessionAcrossFailover(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) {
			c := nodetest.Start(t, 3, nodetest.WithBackend(backend))
			ctx := ctxT(t)
			leader := c.Leader(t)
			const ttl = 7000
			id := createSession(t, leader, ttl)
			a := acquireUnder(t, leader, "f/a", id)
			_, err := leader.Lock.KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: id})
			require.NoError(t, err)
			kept := time.Now() // after every node's apply of the KeepAlive, up to a follower's lag
			time.Sleep(2 * time.Second)

			c.Stop(c.WaitLeader(t))
			nl := c.Leader(t)
			got, err := nl.Lock.GetLock(ctx, &ticketv1.GetLockRequest{Key: "f/a"})
			require.NoError(t, err)
			require.True(t, got.GetHeld(), "the lock under the session survives the failover")
			assert.Equal(t, a.GetToken(), got.GetToken())
			// The new leader measures the session from its own apply of the
			// KeepAlive (at most a replication lag after kept), not afresh
			// at its promotion (2 s or more after kept).
			elapsed := time.Since(kept).Milliseconds()
			assert.Less(t, got.GetRemainingMs(), int64(ttl)-elapsed+1000, "no fresh lease at promotion (%d ms since the KeepAlive)", elapsed)
			assert.Positive(t, got.GetRemainingMs())

			_, err = nl.Lock.KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: id})
			require.NoError(t, err, "the new leader keeps the session alive")
			eventually(t, func() bool {
				got, err := nl.Lock.GetLock(ctx, &ticketv1.GetLockRequest{Key: "f/a"})
				return err == nil && !got.GetHeld()
			}, "the new leader's lessor ends the session")
			_, err = nl.Lock.KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: id})
			requireCode(t, connect.CodeNotFound, err)
		})
	}
}
