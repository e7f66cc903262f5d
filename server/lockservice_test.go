package server_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
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
)

func TestAcquireReleaseRoundTrip(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t)
	ctx := ctxT(t)
	res, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "jobs/a", LeaseMs: 5000, Owner: "me"})
	require.NoError(t, err)
	assert.Equal(t, uint64(1), res.GetToken())
	assert.Equal(t, int64(5000), res.GetLeaseMs())

	got := held(t, in, "jobs/a")
	assert.True(t, got.GetHeld())
	assert.Equal(t, uint64(1), got.GetToken())
	assert.Equal(t, "me", got.GetOwner())
	assert.Greater(t, got.GetRemainingMs(), int64(0))
	assert.LessOrEqual(t, got.GetRemainingMs(), int64(5000))

	chk, err := in.Lock.CheckToken(ctx, &ticketv1.CheckTokenRequest{Key: "jobs/a", Token: 1})
	require.NoError(t, err)
	assert.True(t, chk.GetValid())
	assert.Equal(t, uint64(1), chk.GetCurrentToken())

	ren, err := in.Lock.Renew(ctx, &ticketv1.RenewRequest{Key: "jobs/a", Token: 1})
	require.NoError(t, err)
	assert.Equal(t, int64(5000), ren.GetLeaseMs())

	_, err = in.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "jobs/a", Token: 1})
	require.NoError(t, err)
	assert.False(t, held(t, in, "jobs/a").GetHeld())
	chk, err = in.Lock.CheckToken(ctx, &ticketv1.CheckTokenRequest{Key: "jobs/a", Token: 1})
	require.NoError(t, err)
	assert.False(t, chk.GetValid())

	_, err = in.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "jobs/a", Token: 1})
	requireCode(t, connect.CodeNotFound, err)
	_, err = in.Lock.Renew(ctx, &ticketv1.RenewRequest{Key: "jobs/a", Token: 1})
	requireCode(t, connect.CodeNotFound, err)

	res, err = in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "jobs/a", LeaseMs: 5000})
	require.NoError(t, err)
	assert.Equal(t, uint64(2), res.GetToken(), "tokens strictly increase")
}

func TestHeldKey(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t)
	ctx := ctxT(t)
	first, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 5000, Owner: "a"})
	require.NoError(t, err)

	before := state(t, in)
	_, err = in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 5000, Owner: "b"})
	requireCode(t, connect.CodeAlreadyExists, err)
	_, err = in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 5000}) // empty owner: never a match
	requireCode(t, connect.CodeAlreadyExists, err)
	assert.Equal(t, before, state(t, in))

	again, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 5000, Owner: "a"})
	require.NoError(t, err, "a retry by the same owner is idempotent")
	assert.Equal(t, first.GetToken(), again.GetToken())
	assert.Equal(t, before.LastToken, state(t, in).LastToken)
}

func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t, withConfig(func(c *config.Config) { c.Lease.MinMS = 100; c.Lease.MaxMS = 60_000 }))
	ctx := ctxT(t)
	res, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 5000})
	require.NoError(t, err)
	tok := res.GetToken()
	long := strings.Repeat("x", core.MaxKeyBytes+1)

	tests := []struct {
		name string
		call func() error
		code connect.Code
	}{
		{"acquire_empty_key", func() error {
			_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{LeaseMs: 1000})
			return err
		}, connect.CodeInvalidArgument},
		{"acquire_oversize_key", func() error {
			_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: long, LeaseMs: 1000})
			return err
		}, connect.CodeInvalidArgument},
		{"acquire_invalid_utf8_key", func() error {
			_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "\xff", LeaseMs: 1000})
			return err
		}, connect.CodeInternal}, // the protobuf codec rejects invalid UTF-8 strings before the handler
		{"acquire_lock_delay_negative", func() error {
			_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "n", LeaseMs: 1000, LockDelayMs: -1})
			return err
		}, connect.CodeInvalidArgument},
		{"acquire_lock_delay_above_max", func() error {
			_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "n", LeaseMs: 1000, LockDelayMs: 60_001})
			return err
		}, connect.CodeInvalidArgument},
		{"acquire_lease_zero", func() error {
			_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "n", LeaseMs: 0})
			return err
		}, connect.CodeInvalidArgument},
		{"acquire_lease_negative", func() error {
			_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "n", LeaseMs: -5})
			return err
		}, connect.CodeInvalidArgument},
		{"acquire_lease_below_min", func() error {
			_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "n", LeaseMs: 99})
			return err
		}, connect.CodeInvalidArgument},
		{"acquire_lease_above_max", func() error {
			_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "n", LeaseMs: 60_001})
			return err
		}, connect.CodeInvalidArgument},
		{"acquire_oversize_owner", func() error {
			_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "n", LeaseMs: 1000, Owner: strings.Repeat("o", core.MaxOwnerBytes+1)})
			return err
		}, connect.CodeInvalidArgument},
		{"release_token_zero", func() error {
			_, err := in.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "k"})
			return err
		}, connect.CodeInvalidArgument},
		{"release_empty_key", func() error {
			_, err := in.Lock.Release(ctx, &ticketv1.ReleaseRequest{Token: tok})
			return err
		}, connect.CodeInvalidArgument},
		{"release_wrong_token", func() error {
			_, err := in.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "k", Token: tok + 1})
			return err
		}, connect.CodeNotFound},
		{"release_unknown_key", func() error {
			_, err := in.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "nope", Token: tok})
			return err
		}, connect.CodeNotFound},
		{"renew_token_zero", func() error {
			_, err := in.Lock.Renew(ctx, &ticketv1.RenewRequest{Key: "k"})
			return err
		}, connect.CodeInvalidArgument},
		{"renew_wrong_token", func() error {
			_, err := in.Lock.Renew(ctx, &ticketv1.RenewRequest{Key: "k", Token: tok + 1})
			return err
		}, connect.CodeNotFound},
		{"get_empty_key", func() error {
			_, err := in.Lock.GetLock(ctx, &ticketv1.GetLockRequest{})
			return err
		}, connect.CodeInvalidArgument},
		{"check_token_zero", func() error {
			_, err := in.Lock.CheckToken(ctx, &ticketv1.CheckTokenRequest{Key: "k"})
			return err
		}, connect.CodeInvalidArgument},
		{"list_negative_page_size", func() error {
			_, err := in.Lock.ListLocks(ctx, &ticketv1.ListLocksRequest{PageSize: -1})
			return err
		}, connect.CodeInvalidArgument},
		{"list_malformed_page_token", func() error {
			_, err := in.Lock.ListLocks(ctx, &ticketv1.ListLocksRequest{PageToken: "%%%"})
			return err
		}, connect.CodeInvalidArgument},
		{"add_member_no_id", func() error {
			_, err := in.Cluster.AddMember(ctx, &ticketv1.AddMemberRequest{Member: &ticketv1.Member{RaftAddr: "127.0.0.1:1", ApiAddr: "127.0.0.1:2"}})
			return err
		}, connect.CodeInvalidArgument},
		{"add_member_bad_addr", func() error {
			_, err := in.Cluster.AddMember(ctx, &ticketv1.AddMemberRequest{Member: &ticketv1.Member{Id: "n5", RaftAddr: "nowhere", ApiAddr: "127.0.0.1:2"}})
			return err
		}, connect.CodeInvalidArgument},
		{"remove_unknown_member", func() error {
			_, err := in.Cluster.RemoveMember(ctx, &ticketv1.RemoveMemberRequest{Id: "n9"})
			return err
		}, connect.CodeInvalidArgument},
		{"transfer_to_unknown_member", func() error {
			_, err := in.Cluster.TransferLeader(ctx, &ticketv1.TransferLeaderRequest{Id: "n9"})
			return err
		}, connect.CodeInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := state(t, in)
			requireCode(t, tc.code, tc.call())
			assert.Equal(t, before, state(t, in))
		})
	}
	t.Run("malformed_json", func(t *testing.T) {
		before := state(t, in)
		for _, body := range []string{`{"key":`, `{"key":"k","leaseMs":"ten"}`, `[1,2]`, `{"token":"-1","key":"k"}`} {
			res, err := http.Post("http://"+in.Addr+"/ticket.v1.LockService/Acquire", "application/json", bytes.NewBufferString(body))
			require.NoError(t, err)
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(res.Body)
			res.Body.Close()
			assert.Equal(t, http.StatusBadRequest, res.StatusCode, body)
			assert.Contains(t, buf.String(), `"code":"invalid_argument"`, body)
		}
		assert.Equal(t, before, state(t, in))
	})
	assert.True(t, held(t, in, "k").GetHeld(), "the lock survived all of it")
}

func TestListLocksPages(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t)
	ctx := ctxT(t)
	for _, k := range []string{"a/1", "a/2", "a/3", "b/1", "a/0"} {
		_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: k, LeaseMs: 5000, Owner: "o-" + k})
		require.NoError(t, err)
	}
	var keys []string
	req := &ticketv1.ListLocksRequest{Prefix: "a/", PageSize: 2}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		res, err := in.Lock.ListLocks(ctx, req)
		require.NoError(t, err)
		for _, l := range res.GetLocks() {
			keys = append(keys, l.GetKey())
			assert.Equal(t, "o-"+l.GetKey(), l.GetOwner())
			assert.Equal(t, int64(5000), l.GetLeaseMs())
		}
		if res.GetNextPageToken() == "" {
			break
		}
		req.PageToken = res.GetNextPageToken()
	}
	assert.Equal(t, []string{"a/0", "a/1", "a/2", "a/3"}, keys)

	stale, err := in.Lock.ListLocks(ctx, &ticketv1.ListLocksRequest{Stale: true})
	require.NoError(t, err)
	assert.Len(t, stale.GetLocks(), 5)
}

func TestWaitersFIFO(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t)
	ctx := ctxT(t)
	h, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 5000, Owner: "h"})
	require.NoError(t, err)
	out := make(chan acquired, 3)
	cctx, cancel := context.WithCancel(ctx)
	for i, name := range []string{"w1", "w2", "w3"} {
		c := ctx
		if name == "w2" {
			c = cctx
		}
		acquireAsync(c, in, name, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 5000, Owner: name, Wait: true}, out)
		waitWaiters(t, in, i+1)
	}
	cancel() // w2 gives up and leaves the queue
	a := recvAcquired(t, out)
	assert.Equal(t, "w2", a.name)
	requireCode(t, connect.CodeCanceled, a.err)
	waitWaiters(t, in, 2)

	_, err = in.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "k", Token: h.GetToken()})
	require.NoError(t, err)
	a = recvAcquired(t, out)
	require.NoError(t, a.err)
	assert.Equal(t, "w1", a.name)
	assert.Equal(t, h.GetToken()+1, a.res.GetToken())

	_, err = in.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "k", Token: a.res.GetToken()})
	require.NoError(t, err)
	b := recvAcquired(t, out)
	require.NoError(t, b.err)
	assert.Equal(t, "w3", b.name)
	assert.Equal(t, a.res.GetToken()+1, b.res.GetToken())
}

func TestWaitRunsOut(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t)
	_, err := in.Lock.Acquire(ctxT(t), &ticketv1.AcquireRequest{Key: "k", LeaseMs: 5000})
	require.NoError(t, err)
	before := state(t, in)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 5000, Wait: true})
	requireCode(t, connect.CodeDeadlineExceeded, err)
	assert.Equal(t, before, state(t, in))
	waitWaiters(t, in, 0)
}

func TestLimits(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t, withConfig(func(c *config.Config) { c.Limits.MaxLocks = 2; c.Limits.MaxWaitersPerKey = 1 }))
	ctx := ctxT(t)
	for _, k := range []string{"a", "b"} {
		_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: k, LeaseMs: 5000, Owner: k})
		require.NoError(t, err)
	}
	_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "a", LeaseMs: 5000, Owner: "a"})
	require.NoError(t, err, "a held key's retry is not a new lock")
	before := state(t, in)
	_, err = in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "c", LeaseMs: 5000})
	requireCode(t, connect.CodeResourceExhausted, err)

	out := make(chan acquired, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	acquireAsync(wctx, in, "w1", &ticketv1.AcquireRequest{Key: "a", LeaseMs: 5000, Wait: true}, out)
	waitWaiters(t, in, 1)
	_, err = in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "a", LeaseMs: 5000, Wait: true})
	requireCode(t, connect.CodeResourceExhausted, err)
	assert.Equal(t, before, state(t, in))
}

func TestExpiryAfterLease(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New()
	in, _ := memNodeWith(t, []server.Option{server.WithClock(clock)})
	ctx := ctxT(t)
	h, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 1000, Owner: "h"})
	require.NoError(t, err)
	out := make(chan acquired, 1)
	acquireAsync(ctx, in, "w1", &ticketv1.AcquireRequest{Key: "k", LeaseMs: 1000, Owner: "w1", Wait: true}, out)
	waitWaiters(t, in, 1)

	clock.Advance(999 * time.Millisecond)
	got := held(t, in, "k")
	assert.Equal(t, h.GetToken(), got.GetToken(), "held until the lease is over")
	assert.Equal(t, int64(1), got.GetRemainingMs())

	clock.Advance(time.Millisecond)
	_, err = in.Lock.Renew(ctx, &ticketv1.RenewRequest{Key: "k", Token: h.GetToken()})
	requireCode(t, connect.CodeNotFound, err) // a renewal after the deadline is refused
	a := recvAcquired(t, out)
	require.NoError(t, a.err, "the waiter is granted when the expiry applies")
	assert.Equal(t, h.GetToken()+1, a.res.GetToken())
	assert.Equal(t, 1.0, metric(t, in, "ticketd_leases_expired_total"))
	// expired on time by the node's clock: one expiry, zero lateness
	assert.Equal(t, 1.0, metric(t, in, "ticketd_lease_expiry_lateness_seconds_count"))
	assert.Equal(t, 0.0, metric(t, in, "ticketd_lease_expiry_lateness_seconds_sum"))
}

func TestRenewKeepsLockPastLease(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New()
	in, _ := memNodeWith(t, []server.Option{server.WithClock(clock)})
	ctx := ctxT(t)
	h, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 1000})
	require.NoError(t, err)
	for range 5 {
		clock.Advance(900 * time.Millisecond)
		_, err := in.Lock.Renew(ctx, &ticketv1.RenewRequest{Key: "k", Token: h.GetToken()})
		require.NoError(t, err)
	}
	got := held(t, in, "k")
	assert.Equal(t, h.GetToken(), got.GetToken())
	assert.Equal(t, int64(1000), got.GetRemainingMs())
}

func TestDemotionFailsWaitersWithLeaderHint(t *testing.T) {
	t.Parallel()
	in, mem := memNode(t)
	ctx := ctxT(t)
	// n9 is not running: AddMember would refuse it (no quorum of members
	// up, no API answering), so it enters through the backend directly.
	require.NoError(t, mem.AddVoter(ctx, core.Member{ID: "n9", RaftAddr: "127.0.0.1:9109", Voter: true}))
	_, err := mem.Propose(ctx, core.SetMember("n9", "127.0.0.1:9009"))
	require.NoError(t, err)
	_, err = in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 5000})
	require.NoError(t, err)
	out := make(chan acquired, 1)
	acquireAsync(ctx, in, "w1", &ticketv1.AcquireRequest{Key: "k", LeaseMs: 5000, Wait: true}, out)
	waitWaiters(t, in, 1)

	mem.Demote(core.Member{ID: "n9", RaftAddr: "127.0.0.1:9109"})
	a := recvAcquired(t, out)
	requireCode(t, connect.CodeUnavailable, a.err)
	hint, ok := leaderHint(a.err)
	require.True(t, ok, "Unavailable names the new leader")
	assert.Equal(t, "n9", hint.GetLeaderId())
	assert.Equal(t, "127.0.0.1:9009", hint.GetLeaderAddr())

	// A request the leader forwarded to this node is not forwarded again.
	fctx, ci := connect.NewClientContext(ctx)
	ci.RequestHeader().Set("Ticketd-Forwarded", "n9")
	_, err = in.Lock.Renew(fctx, &ticketv1.RenewRequest{Key: "k", Token: 1})
	requireCode(t, connect.CodeUnavailable, err)
	hint, ok = leaderHint(err)
	require.True(t, ok)
	assert.Equal(t, "n9", hint.GetLeaderId())
}

// holdGrants makes the node's proposals of grants wait until release is
// closed; the returned channel receives each held grant's owner.
func holdGrants(mem interface{ SetProposeHook(func(core.Command)) }, first int) (held chan string, release chan struct{}) {
	held = make(chan string, 10)
	release = make(chan struct{})
	var mu sync.Mutex
	n := 0
	mem.SetProposeHook(func(c core.Command) {
		if c.Op != core.OpGrant {
			return
		}
		mu.Lock()
		n++
		hold := n <= first
		mu.Unlock()
		if hold {
			held <- c.Owner
			<-release
		}
	})
	return held, release
}

func TestGhostGrantIsReleased(t *testing.T) {
	t.Parallel()
	in, mem := memNode(t)
	ctx := ctxT(t)
	heldCh, release := holdGrants(mem, 1)
	cctx, cancel := context.WithCancel(ctx)
	out := make(chan acquired, 1)
	acquireAsync(cctx, in, "gone", &ticketv1.AcquireRequest{Key: "k", LeaseMs: 60_000, Owner: "gone"}, out)
	<-heldCh
	cancel()
	requireCode(t, connect.CodeCanceled, recvAcquired(t, out).err)
	waitCanceled(t, in, 1) // the server saw the client go
	close(release)         // the grant now applies, with its client gone

	eventually(t, func() bool { s := state(t, in); return s.LastToken == 1 && s.LocksHeld == 0 }, "ghost released")
	assert.Equal(t, 1.0, metric(t, in, "ticketd_ghost_releases_total"))
}

func TestRetryAfterGhostGetsFreshToken(t *testing.T) {
	t.Parallel()
	in, mem := memNode(t)
	ctx := ctxT(t)
	heldCh, release := holdGrants(mem, 1)
	cctx, cancel := context.WithCancel(ctx)
	out := make(chan acquired, 2)
	req := &ticketv1.AcquireRequest{Key: "k", LeaseMs: 60_000, Owner: "client-1"}
	acquireAsync(cctx, in, "first", req, out)
	<-heldCh
	cancel()
	requireCode(t, connect.CodeCanceled, recvAcquired(t, out).err)
	waitCanceled(t, in, 1)

	acquireAsync(ctx, in, "retry", req, out) // same owner, no wait
	waitWaiters(t, in, 1)                    // it waits for the first attempt
	close(release)
	a := recvAcquired(t, out)
	require.NoError(t, a.err)
	assert.Equal(t, uint64(2), a.res.GetToken(), "never the token about to be released")
	got := held(t, in, "k")
	assert.Equal(t, uint64(2), got.GetToken())
	assert.Equal(t, "client-1", got.GetOwner())
}

func TestStatusAndHealth(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t)
	ctx := ctxT(t)
	_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 5000})
	require.NoError(t, err)
	st, err := in.Cluster.Status(ctx, &ticketv1.StatusRequest{})
	require.NoError(t, err)
	assert.Equal(t, "n1", st.GetNodeId())
	assert.Equal(t, "n1", st.GetLeaderId())
	assert.Equal(t, in.Addr, st.GetLeaderAddr())
	assert.Equal(t, uint64(1), st.GetLastToken())
	assert.Equal(t, int64(1), st.GetLocksHeld())
	require.Len(t, st.GetMembers(), 1)
	assert.Equal(t, in.Addr, st.GetMembers()[0].GetApiAddr())

	res, err := http.Post("http://"+in.Addr+"/grpc.health.v1.Health/Check", "application/json", strings.NewReader(`{"service":"ticket.v1.LockService"}`))
	require.NoError(t, err)
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(res.Body)
	res.Body.Close()
	assert.Contains(t, buf.String(), "SERVING")
	assert.GreaterOrEqual(t, metric(t, in, "ticketd_is_leader"), 1.0)
}
