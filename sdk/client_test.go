package sdk_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(closingM{m})
}

// newClient returns a client for endpoints, closed when the test ends.
func newClient(t *testing.T, endpoints []string, opts ...sdk.Option) *sdk.Client {
	t.Helper()
	c, err := sdk.New(endpoints, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testCtx is bounded so that a hung call fails the test instead of the run.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		endpoints []string
		wantErr   error
		want      []string
	}{
		{name: "no_endpoints", wantErr: sdk.ErrInvalidArgument},
		{name: "bad_endpoint", endpoints: []string{"no-port"}, wantErr: sdk.ErrInvalidArgument},
		{name: "host_port", endpoints: []string{"127.0.0.1:7001"}, want: []string{"http://127.0.0.1:7001"}},
		{name: "url", endpoints: []string{"https://ticketd.example:443/"}, want: []string{"https://ticketd.example:443"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := sdk.New(tt.endpoints)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
				return
			}
			if assert.NoError(t, err) {
				assert.Equal(t, tt.want, c.Endpoints())
				assert.NoError(t, c.Close())
			}
		})
	}
}

func TestLockUnlockTryLock(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t)

	l, err := c.TryLock(ctx, "a", 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), l.Token())
	assert.Equal(t, "a", l.Key())
	assert.Equal(t, 10*time.Second, l.TTL())
	assert.NoError(t, l.Err())

	_, err = c.TryLock(ctx, "a", 10*time.Second)
	assert.ErrorIs(t, err, sdk.ErrLocked)
	var ce *connect.Error
	assert.ErrorAs(t, err, &ce, "the server's error stays reachable")

	valid, cur, err := c.Check(ctx, "a", l.Token())
	require.NoError(t, err)
	assert.True(t, valid)
	assert.Equal(t, l.Token(), cur)

	require.NoError(t, l.Unlock(ctx))
	<-l.Done()
	assert.ErrorIs(t, l.Err(), sdk.ErrReleased)
	assert.NoError(t, l.Unlock(ctx), "a second Unlock is a no-op")
	assert.Nil(t, fc.holder("a"))

	l2, err := c.TryLock(ctx, "a", 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), l2.Token())
	valid, cur, err = c.Check(ctx, "a", l.Token())
	require.NoError(t, err)
	assert.False(t, valid)
	assert.Equal(t, l2.Token(), cur)
	require.NoError(t, l2.Unlock(ctx))
}

func TestLockWaitsForRelease(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t)

	l1, err := c.Lock(ctx, "w", 10*time.Second)
	require.NoError(t, err)
	got := make(chan *sdk.Lease, 1)
	go func() {
		l, err := c.Lock(ctx, "w", 10*time.Second)
		assert.NoError(t, err)
		got <- l
	}()
	require.Eventually(t, func() bool { return len(fc.callsTo("Acquire")) == 2 }, 10*time.Second, time.Millisecond)
	select {
	case <-got:
		t.Fatal("Lock returned while the key was held")
	default:
	}
	require.NoError(t, l1.Unlock(ctx))
	l2 := <-got
	require.NotNil(t, l2)
	assert.Greater(t, l2.Token(), l1.Token())
	require.NoError(t, l2.Unlock(ctx))
}

func TestLockAfterLongWaitMeasuresLeaseAfresh(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t)
	const ttl = 300 * time.Millisecond

	holder, err := c.TryLock(ctx, "w", 10*time.Second)
	require.NoError(t, err)
	got := make(chan *sdk.Lease, 1)
	go func() {
		l, err := c.Lock(ctx, "w", ttl)
		assert.NoError(t, err)
		got <- l
	}()
	require.Eventually(t, func() bool { return len(fc.callsTo("Acquire")) == 2 }, 10*time.Second, time.Millisecond)
	time.Sleep(2 * ttl) // the waiter's request is now older than its TTL
	require.NoError(t, holder.Unlock(ctx))
	l := <-got
	require.NotNil(t, l)

	// Lock renewed once before returning, so the lease is measured from that
	// renewal rather than from the old Acquire request, and is still open.
	var renewed bool
	for _, k := range fc.callsTo("Renew") {
		renewed = renewed || k.token == l.Token()
	}
	assert.True(t, renewed, "no renewal before Lock returned")
	select {
	case <-l.Done():
		t.Fatalf("fresh lease already ended: %v", l.Err())
	default:
	}
	require.NoError(t, l.Unlock(ctx))
}

func TestLockCtxEndWhileWaitingIsAmbiguous(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	l1, err := c.TryLock(testCtx(t), "w", 10*time.Second)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = c.Lock(ctx, "w", 10*time.Second)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, sdk.ErrAmbiguous, "the grant may have raced the cancellation")
	require.NoError(t, l1.Unlock(testCtx(t)))
}

func TestFindsAndFollowsLeader(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.setLeader(2)
	// Only a follower is configured: the client learns the leader from it.
	c := newClient(t, []string{fc.addr(0)})
	ctx := testCtx(t)

	l, err := c.TryLock(ctx, "k", 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, fc.addr(2), c.Leader())
	for _, k := range fc.callsTo("Acquire") {
		assert.Equal(t, 2, k.node, "Acquire went to the leader directly")
	}

	// Leadership moves: the old leader's hint redirects the next call.
	fc.setLeader(1)
	require.NoError(t, l.Unlock(ctx))
	assert.Equal(t, fc.addr(1), c.Leader())
	rel := fc.callsTo("Release")
	require.Len(t, rel, 2)
	assert.Equal(t, []int{2, 1}, []int{rel[0].node, rel[1].node})
}

func TestFailsOverDeadEndpoint(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, []string{sdk.ClosedAddr(t), fc.addr(0)})
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "k", 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
}

func TestRetriesUnavailable(t *testing.T) {
	fc := newFakeCluster(t, 1)
	var n atomic.Int32
	fc.setHook(func(ctx context.Context, method string, req any) error {
		if method == "Acquire" && n.Add(1) <= 3 {
			fc.expire("k") // undo the grant: this reply says it did not happen
			return connect.NewError(connect.CodeUnavailable, errors.New("no leader"))
		}
		return nil
	})
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "k", 10*time.Second)
	require.NoError(t, err)
	assert.Len(t, fc.callsTo("Acquire"), 4)
	require.NoError(t, l.Unlock(ctx))
}

func TestAmbiguousAcquireRetriesWithSameOwner(t *testing.T) {
	fc := newFakeCluster(t, 1)
	var n atomic.Int32
	fc.setHook(func(ctx context.Context, method string, req any) error {
		if method == "Acquire" && n.Add(1) == 1 {
			<-ctx.Done() // granted, but the reply is lost
			return ctx.Err()
		}
		return nil
	})
	c := newClient(t, fc.endpoints(), sdk.WithRequestTimeout(200*time.Millisecond))
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "k", 10*time.Second)
	require.NoError(t, err, "the retry finds its own grant instead of ErrLocked")
	assert.Equal(t, uint64(1), l.Token())
	assert.Equal(t, uint64(1), fc.tokens(), "one grant only")
	calls := fc.callsTo("Acquire")
	require.Len(t, calls, 2)
	assert.Equal(t, calls[0].owner, calls[1].owner)
	assert.Equal(t, l.Owner(), calls[0].owner)
	require.NoError(t, l.Unlock(ctx))

	// A new call uses a new owner.
	l2, err := c.TryLock(ctx, "k", 10*time.Second)
	require.NoError(t, err)
	assert.NotEqual(t, l.Owner(), l2.Owner())
	require.NoError(t, l2.Unlock(ctx))
}

func TestAmbiguousAcquireIsSurfaced(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.setHook(func(ctx context.Context, method string, req any) error {
		if method == "Acquire" {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	c := newClient(t, fc.endpoints(), sdk.WithRequestTimeout(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := c.TryLock(ctx, "k", 10*time.Second)
	require.Error(t, err)
	assert.ErrorIs(t, err, sdk.ErrAmbiguous)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	var ae *sdk.AmbiguousError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "k", ae.Key)
	assert.Equal(t, "acquire", ae.Op)
	// The fake granted it (the client may already be releasing it, so
	// the grant is looked up in the fake's log, not its table).
	fc.mu.Lock()
	var granted *ticketv1.WatchEvent
	for _, ev := range fc.events {
		if ev.GetType() == ticketv1.WatchEvent_TYPE_GRANTED && ev.GetKey() == "k" {
			granted = ev
		}
	}
	fc.mu.Unlock()
	require.NotNil(t, granted, "the fake did grant it")
	assert.Equal(t, ae.Owner, granted.GetOwner())

	// The client releases the ghost grant in the background.
	require.Eventually(t, func() bool { return fc.holder("k") == nil }, 10*time.Second, 5*time.Millisecond)
}

func TestUnreachableIsNotAmbiguous(t *testing.T) {
	c := newClient(t, []string{sdk.ClosedAddr(t), sdk.ClosedAddr(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.TryLock(ctx, "k", time.Second)
	require.Error(t, err)
	assert.NotErrorIs(t, err, sdk.ErrAmbiguous, "connection refused: nothing was sent")
	assert.ErrorIs(t, err, sdk.ErrConnectionRefused, "no server ever answered: the endpoints are wrong")
	assert.ErrorIs(t, err, sdk.ErrUnavailable)
}

func TestErrors(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "held", 10*time.Second)
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Unlock(ctx)) }()

	tests := []struct {
		name string
		call func() error
		want error
	}{
		{name: "empty_key", call: func() error { _, err := c.TryLock(ctx, "", time.Second); return err }, want: sdk.ErrInvalidArgument},
		{name: "zero_ttl", call: func() error { _, err := c.Acquire(ctx, "x", 0); return err }, want: sdk.ErrInvalidArgument},
		{name: "locked", call: func() error { _, err := c.Acquire(ctx, "held", time.Second); return err }, want: sdk.ErrLocked},
		{name: "release_wrong_token", call: func() error { return c.Release(ctx, "held", 99) }, want: sdk.ErrNotHeld},
		{name: "release_free_key", call: func() error { return c.Release(ctx, "free", 1) }, want: sdk.ErrNotHeld},
		{name: "renew_wrong_token", call: func() error { _, err := c.Renew(ctx, "held", 99); return err }, want: sdk.ErrNotHeld},
		{name: "check_token_zero", call: func() error { _, _, err := c.Check(ctx, "held", 0); return err }, want: sdk.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			assert.ErrorIs(t, err, tt.want)
			assert.NotErrorIs(t, err, sdk.ErrAmbiguous)
		})
	}
}

func TestAcquireWithOwnerIsIdempotent(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t)
	g1, err := c.Acquire(ctx, "k", 5*time.Second, sdk.WithOwner("job-7"))
	require.NoError(t, err)
	g2, err := c.Acquire(ctx, "k", 5*time.Second, sdk.WithOwner("job-7"))
	require.NoError(t, err)
	assert.Equal(t, g1.Token, g2.Token)
	assert.Equal(t, "job-7", g2.Owner)
	_, err = c.Acquire(ctx, "k", 5*time.Second, sdk.WithOwner("job-8"))
	assert.ErrorIs(t, err, sdk.ErrLocked)
	ttl, err := c.Renew(ctx, "k", g1.Token)
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, ttl)
	require.NoError(t, c.Release(ctx, "k", g1.Token))
}

func TestLeaseRenews(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t)
	// A TTL long enough that a renewal sent late on a starved machine
	// still lands before the local deadline (TTL − 50 ms after the last
	// acknowledged send; renewals every TTL/3).
	l, err := c.TryLock(ctx, "k", 2*time.Second)
	require.NoError(t, err)
	first := l.Deadline()
	require.Eventually(t, func() bool { return len(fc.callsTo("Renew")) >= 3 }, 10*time.Second, time.Millisecond)
	select {
	case <-l.Done():
		t.Fatalf("lease ended while renewals succeed: %v", l.Err())
	default:
	}
	assert.True(t, l.Deadline().After(first), "acknowledged renewals move the deadline")
	for _, k := range fc.callsTo("Renew") {
		assert.Equal(t, l.Token(), k.token)
	}
	require.NoError(t, l.Unlock(ctx))
}

func TestLeaseLostWhenRenewRefused(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t)
	// Long enough that the renewal goes out before the local deadline even
	// when its timer fires late: the lease must end by the refusal.
	l, err := c.TryLock(ctx, "k", 2*time.Second)
	require.NoError(t, err)
	fc.expire("k") // the server forgets the lock: the next renewal is refused
	<-l.Done()
	assert.ErrorIs(t, l.Err(), sdk.ErrLeaseLost)
	assert.ErrorIs(t, l.Err(), sdk.ErrNotHeld)
	assert.NotEmpty(t, fc.callsTo("Renew"))
}

func TestLeaseLostWhenUnreachable(t *testing.T) {
	fc := newFakeCluster(t, 2)
	// Record the send time of every acknowledged renewal, as the SDK's
	// transport sees it: always at or after the SDK's own send time.
	var (
		mu        sync.Mutex
		lastAck   time.Time
		renewAcks int
	)
	rec := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			sent := time.Now()
			res, err := next(ctx, req)
			if err == nil && (req.Spec().Procedure == "/ticket.v1.LockService/Renew" || req.Spec().Procedure == "/ticket.v1.LockService/Acquire") {
				mu.Lock()
				lastAck = sent
				if req.Spec().Procedure == "/ticket.v1.LockService/Renew" {
					renewAcks++
				}
				mu.Unlock()
			}
			return res, err
		}
	})
	c := newClient(t, fc.endpoints(), sdk.WithConnectOptions(connect.WithInterceptors(rec)))
	ctx := testCtx(t)
	// The lease must outlive two renewals whose replies are held back:
	// renewals go out every TTL/3 and the local deadline is TTL − 50 ms
	// after the last acknowledged send, so a 2 s TTL leaves well over a
	// second for a late timer and a late reply on a starved machine (with
	// a few hundred milliseconds, one late wakeup ended the lease first).
	const ttl = 2 * time.Second
	// Replies take longer than the safety margin to come back: a deadline
	// measured from when a reply arrives, not from when its request was
	// sent, would end after the server's.
	fc.setHook(func(ctx context.Context, method string, req any) error {
		if method == "Renew" {
			time.Sleep(2 * sdk.DefaultMinMargin)
		}
		return nil
	})
	l, err := c.TryLock(ctx, "k", ttl)
	require.NoError(t, err)
	acks := func() int {
		mu.Lock()
		defer mu.Unlock()
		return renewAcks
	}
	require.Eventually(t, func() bool { return acks() >= 2 || l.Err() != nil }, 30*time.Second, time.Millisecond)
	require.NoError(t, l.Err(), "the lease ended before two renewals were acknowledged")

	fc.setHook(func(ctx context.Context, method string, req any) error {
		return connect.NewError(connect.CodeUnavailable, errors.New("no quorum"))
	})
	<-l.Done()
	doneAt := time.Now()
	assert.ErrorIs(t, l.Err(), sdk.ErrLeaseLost)
	assert.NotErrorIs(t, l.Err(), sdk.ErrNotHeld)
	mu.Lock()
	defer mu.Unlock()
	assert.False(t, l.Deadline().After(lastAck.Add(ttl)), "local deadline %v is after last acknowledged send + ttl %v", l.Deadline(), lastAck.Add(ttl))
	assert.False(t, doneAt.Before(l.Deadline()), "Done closed before the deadline without a refusal")
}

func TestStaleUnlockKeepsNewHolder(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t)
	a, err := c.TryLock(ctx, "k", 10*time.Second)
	require.NoError(t, err)
	fc.expire("k") // a's lease ran out on the server
	b, err := c.TryLock(ctx, "k", 10*time.Second)
	require.NoError(t, err)

	err = a.Unlock(ctx)
	assert.ErrorIs(t, err, sdk.ErrNotHeld)
	assert.ErrorIs(t, a.Err(), sdk.ErrLeaseLost)
	require.NotNil(t, fc.holder("k"))
	assert.Equal(t, b.Token(), fc.holder("k").GetToken(), "b still holds the key")
	require.NoError(t, b.Unlock(ctx))
}

func TestCloseEndsLeases(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c, err := sdk.New(fc.endpoints())
	require.NoError(t, err)
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "k", 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	<-l.Done()
	assert.ErrorIs(t, l.Err(), sdk.ErrLeaseLost)
	assert.ErrorIs(t, l.Err(), sdk.ErrClosed)
	_, err = c.TryLock(ctx, "j", time.Second)
	assert.ErrorIs(t, err, sdk.ErrClosed)
	assert.NotNil(t, fc.holder("k"), "Close does not release")
}

func TestGRPCProtocol(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.setLeader(1)
	c := newClient(t, []string{fc.addr(0)}, sdk.WithGRPC())
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "k", 10*time.Second)
	require.NoError(t, err)
	_, err = c.TryLock(ctx, "k", 10*time.Second)
	assert.ErrorIs(t, err, sdk.ErrLocked)
	require.NoError(t, l.Unlock(ctx))
}

func TestReads(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t)
	for _, k := range []string{"p/a", "p/b", "p/c", "q/a", "p/d"} {
		_, err := c.Acquire(ctx, k, 10*time.Second, sdk.WithOwner("o-"+k))
		require.NoError(t, err)
	}
	locks, err := c.ListLocks(ctx, "p/")
	require.NoError(t, err)
	var keys []string
	for _, l := range locks {
		keys = append(keys, l.Key)
		assert.True(t, l.Held)
		assert.Equal(t, "o-"+l.Key, l.Owner)
	}
	assert.Equal(t, []string{"p/a", "p/b", "p/c", "p/d"}, keys, "all pages, in key order")

	info, err := c.GetLock(ctx, "q/a")
	require.NoError(t, err)
	assert.True(t, info.Held)
	assert.Equal(t, 10*time.Second, info.TTL)
	info, err = c.GetLock(ctx, "none", sdk.WithStale())
	require.NoError(t, err)
	assert.False(t, info.Held)
}

func TestCluster(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.setLeader(1)
	c := newClient(t, []string{fc.addr(0)})
	ctx := testCtx(t)

	st, err := c.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, "b", st.GetNodeId(), "Status comes from the leader")
	st, err = c.NodeStatus(ctx, fc.addr(2))
	require.NoError(t, err)
	assert.Equal(t, "c", st.GetNodeId())

	members, err := c.AddMember(ctx, "d", "127.0.0.1:1", "127.0.0.1:2")
	require.NoError(t, err)
	require.Len(t, members, 1)
	assert.True(t, proto.Equal(&ticketv1.Member{Id: "d", RaftAddr: "127.0.0.1:1", ApiAddr: "127.0.0.1:2", Voter: true}, members[0]))
	_, err = c.RemoveMember(ctx, "d")
	require.NoError(t, err)

	id, err := c.TransferLeader(ctx, "c")
	require.NoError(t, err)
	assert.Equal(t, "c", id)
	st, err = c.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, "c", st.GetNodeId())
}
