package sdk_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// requireOpen fails the test if l's Done is closed.
func requireOpen(t *testing.T, l *sdk.Lease) {
	t.Helper()
	select {
	case <-l.Done():
		t.Fatalf("lease %q token %d ended: %v", l.Key(), l.Token(), l.Err())
	default:
	}
}

func TestRLockSharedHoldersThenLockWaits(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t)

	var readers []*sdk.Lease
	for range 3 {
		l, err := c.RLock(ctx, "data")
		require.NoError(t, err)
		assert.True(t, l.Shared())
		require.NotNil(t, l.Session(), "RLock holds under the default session")
		readers = append(readers, l)
	}
	assert.Less(t, readers[0].Token(), readers[1].Token())
	assert.Less(t, readers[1].Token(), readers[2].Token())
	assert.Len(t, fc.callsTo("CreateSession"), 1, "one default session for every lock of the client")
	for _, k := range fc.callsTo("Acquire") {
		assert.Equal(t, readers[0].Session().ID(), k.sess)
	}

	info, err := c.GetLock(ctx, "data")
	require.NoError(t, err)
	assert.True(t, info.Held)
	assert.Equal(t, sdk.ModeShared, info.Mode)
	assert.Zero(t, info.Token, "the singular fields describe only an exclusive lock")
	require.Len(t, info.Holders, 3)
	for i, h := range info.Holders {
		assert.Equal(t, readers[i].Token(), h.Token)
		assert.Equal(t, readers[i].Owner(), h.Owner)
		assert.Equal(t, readers[i].Session().ID(), h.Session)
	}
	_, err = c.TryLock(ctx, "data", 0)
	assert.ErrorIs(t, err, sdk.ErrLocked, "an exclusive request does not fit beside shared holders")

	got := make(chan *sdk.Lease, 1)
	go func() {
		l, err := c.Lock(ctx, "data", 0)
		assert.NoError(t, err)
		got <- l
	}()
	require.Eventually(t, func() bool { return len(fc.callsTo("Acquire")) >= 5 }, 10*time.Second, time.Millisecond)
	for i, r := range readers {
		select {
		case <-got:
			t.Fatalf("Lock returned while %d shared holders remained", len(readers)-i)
		default:
		}
		require.NoError(t, r.Unlock(ctx))
		assert.ErrorIs(t, r.Err(), sdk.ErrReleased)
	}
	w := <-got
	require.NotNil(t, w)
	assert.False(t, w.Shared())
	assert.Greater(t, w.Token(), readers[2].Token())
	info, err = c.GetLock(ctx, "data")
	require.NoError(t, err)
	assert.Equal(t, sdk.ModeExclusive, info.Mode)
	assert.Equal(t, w.Token(), info.Token, "an exclusive lock fills the singular fields")
	require.NoError(t, w.Unlock(ctx))
	assert.Empty(t, fc.callsTo("Renew"), "locks under a session are kept alive by KeepAlive, not Renew")
}

func TestSemaphoreLimit(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t)
	sem := c.Semaphore("workers", 2)

	a, err := sem.TryAcquire(ctx)
	require.NoError(t, err)
	b, err := sem.TryAcquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint32(2), a.Limit())
	assert.NotEqual(t, a.Token(), b.Token(), "every holder has its own token")
	_, err = sem.TryAcquire(ctx)
	assert.ErrorIs(t, err, sdk.ErrLocked, "both slots are taken")

	info, err := c.GetLock(ctx, "workers")
	require.NoError(t, err)
	assert.Equal(t, uint32(2), info.Limit)
	assert.Len(t, info.Holders, 2)

	_, err = c.Semaphore("workers", 3).TryAcquire(ctx)
	require.ErrorIs(t, err, sdk.ErrLimitMismatch)
	var lm *sdk.LimitMismatchError
	require.ErrorAs(t, err, &lm)
	assert.Equal(t, uint32(2), lm.Limit, "the error carries the key's limit")
	_, err = c.TryLock(ctx, "workers", 0)
	require.ErrorAs(t, err, &lm, "a lock on a semaphore's key is a mismatch too")

	waiter := make(chan *sdk.Lease, 1)
	go func() {
		l, err := sem.Acquire(ctx)
		assert.NoError(t, err)
		waiter <- l
	}()
	require.NoError(t, a.Unlock(ctx))
	l := <-waiter
	require.NotNil(t, l)
	assert.Greater(t, l.Token(), b.Token())
	require.NoError(t, b.Unlock(ctx))
	require.NoError(t, l.Unlock(ctx))

	_, err = c.Semaphore("bad", 0).TryAcquire(ctx)
	assert.ErrorIs(t, err, sdk.ErrInvalidArgument)
}

// TestSemaphoreNeverOverfull: 4 goroutines take a 2-slot semaphore in turn;
// the fake's table never shows more than 2 holders.
func TestSemaphoreNeverOverfull(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				l, err := c.Semaphore("pool", 2).Acquire(ctx)
				if !assert.NoError(t, err) {
					return
				}
				assert.LessOrEqual(t, len(fc.holders("pool")), 2)
				assert.NoError(t, l.Unlock(ctx))
			}
		}()
	}
	wg.Wait()
	assert.Empty(t, fc.holders("pool"))
}

func TestDefaultSessionLostEndsItsLeasesAndIsReplaced(t *testing.T) {
	fc := newFakeCluster(t, 1)
	// A TTL long enough that a keep-alive sent late on a starved machine
	// still lands before the local deadline: the session must end by the
	// refusal below, not by its deadline.
	c := newClient(t, fc.endpoints(), sdk.WithSessionTTL(2*time.Second))
	ctx := testCtx(t)

	a, err := c.RLock(ctx, "a")
	require.NoError(t, err)
	b, err := c.Semaphore("b", 3).Acquire(ctx)
	require.NoError(t, err)
	own, err := c.Lock(ctx, "own", 10*time.Second)
	require.NoError(t, err)
	assert.Nil(t, own.Session(), "a ttl gives a lease of its own")
	require.Eventually(t, func() bool { return len(fc.callsTo("KeepAlive")) >= 2 }, 10*time.Second, time.Millisecond)
	requireOpen(t, a)
	requireOpen(t, b)
	assert.Equal(t, 2*time.Second, a.TTL())

	fc.expireSession(a.Session().ID()) // the session's lease ran out on the servers
	<-a.Done()
	<-b.Done()
	for _, l := range []*sdk.Lease{a, b} {
		assert.ErrorIs(t, l.Err(), sdk.ErrLeaseLost)
		assert.ErrorIs(t, l.Err(), sdk.ErrSessionNotFound)
	}
	assert.ErrorIs(t, a.Session().Err(), sdk.ErrSessionNotFound)
	requireOpen(t, own)

	a2, err := c.RLock(ctx, "a")
	require.NoError(t, err)
	assert.NotEqual(t, a.Session().ID(), a2.Session().ID(), "the next lock opens a new default session")
	assert.Len(t, fc.callsTo("CreateSession"), 2)
	require.NoError(t, own.Unlock(ctx))
}

func TestDefaultSessionGoneAtAcquireIsReplaced(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t)
	a, err := c.RLock(ctx, "a")
	require.NoError(t, err)
	fc.expireSession(a.Session().ID()) // before any KeepAlive could notice
	b, err := c.RLock(ctx, "b")
	require.NoError(t, err, "the refused session is replaced at once")
	assert.NotEqual(t, a.Session().ID(), b.Session().ID())
	<-a.Done()
	assert.ErrorIs(t, a.Err(), sdk.ErrSessionNotFound)
}

func TestCloseClosesDefaultSession(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c, err := sdk.New(fc.endpoints())
	require.NoError(t, err)
	ctx := testCtx(t)
	a, err := c.RLock(ctx, "a")
	require.NoError(t, err)
	b, err := c.Lock(ctx, "b", 0)
	require.NoError(t, err)
	own, err := c.Lock(ctx, "own", 10*time.Second)
	require.NoError(t, err)

	require.NoError(t, c.Close())
	assert.Len(t, fc.callsTo("CloseSession"), 1, "one call releases every lock of the session")
	assert.Nil(t, fc.holder("a"))
	assert.Nil(t, fc.holder("b"))
	assert.ErrorIs(t, a.Err(), sdk.ErrReleased)
	assert.ErrorIs(t, b.Err(), sdk.ErrReleased)
	assert.NotNil(t, fc.holder("own"), "a lease of its own is left to its TTL")
	assert.ErrorIs(t, own.Err(), sdk.ErrClosed)
	assert.Zero(t, fc.liveSessions())
	_, err = c.RLock(ctx, "a")
	assert.ErrorIs(t, err, sdk.ErrClosed)
}

func TestWithLeaseRenewsOnItsOwn(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t)
	l, err := c.RLock(ctx, "k", sdk.WithLease(900*time.Millisecond))
	require.NoError(t, err)
	assert.Nil(t, l.Session())
	require.Eventually(t, func() bool { return len(fc.callsTo("Renew")) >= 2 }, 10*time.Second, time.Millisecond)
	assert.Empty(t, fc.callsTo("CreateSession"))
	require.NoError(t, l.Unlock(ctx))
}

func TestSessionKeepAliveAndClose(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t)
	// Long enough that keep-alives sent late on a starved machine still
	// land before the local deadline.
	s, err := c.CreateSession(ctx, 2*time.Second)
	require.NoError(t, err)
	assert.NotZero(t, s.ID())
	first := s.Deadline()
	l, err := c.Lock(ctx, "k", 10*time.Second, sdk.WithSession(s))
	require.NoError(t, err)
	assert.Same(t, s, l.Session(), "WithSession wins over a ttl")
	require.Eventually(t, func() bool { return len(fc.callsTo("KeepAlive")) >= 2 }, 10*time.Second, time.Millisecond)
	assert.True(t, s.Deadline().After(first), "acknowledged keep-alives move the deadline")
	requireOpen(t, l)
	for _, k := range fc.callsTo("KeepAlive") {
		assert.Equal(t, s.ID(), k.sess)
	}

	require.NoError(t, s.Close(ctx))
	<-l.Done()
	assert.ErrorIs(t, l.Err(), sdk.ErrReleased)
	assert.ErrorIs(t, s.Err(), sdk.ErrReleased)
	assert.Nil(t, fc.holder("k"))
	assert.NoError(t, s.Close(ctx), "a second Close is a no-op")
	assert.Len(t, fc.callsTo("CloseSession"), 1)
}

func TestSessionErrors(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t)
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{name: "acquire_unknown_session", call: func() error {
			_, err := c.Acquire(ctx, "k", 0, sdk.WithSessionID(77))
			return err
		}, want: sdk.ErrSessionNotFound},
		{name: "keepalive_unknown", call: func() error { _, err := c.KeepAlive(ctx, 77); return err }, want: sdk.ErrSessionNotFound},
		{name: "close_unknown", call: func() error { return c.CloseSession(ctx, 77) }, want: sdk.ErrSessionNotFound},
		{name: "lock_with_session_id", call: func() error {
			_, err := c.Lock(ctx, "k", 0, sdk.WithSessionID(77))
			return err
		}, want: sdk.ErrInvalidArgument},
		{name: "create_zero_ttl", call: func() error { _, err := c.CreateSession(ctx, 0); return err }, want: sdk.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			assert.ErrorIs(t, err, tt.want)
			assert.NotErrorIs(t, err, sdk.ErrNotHeld)
		})
	}
}

func TestAcquireUnderSessionID(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t)
	s, err := c.CreateSession(ctx, 900*time.Millisecond)
	require.NoError(t, err)
	g, err := c.Acquire(ctx, "k", 0, sdk.WithSessionID(s.ID()), sdk.WithShared())
	require.NoError(t, err)
	assert.Equal(t, s.ID(), g.Session)
	assert.Equal(t, 900*time.Millisecond, g.TTL, "the session's TTL is the lease")
	_, err = c.Renew(ctx, "k", g.Token)
	assert.Error(t, err, "a lock under a session is not renewed on its own")
	require.NoError(t, c.CloseSession(ctx, s.ID()))
	assert.Nil(t, fc.holder("k"), "closing the session released its lock")
	<-s.Done()
	assert.ErrorIs(t, s.Err(), sdk.ErrLeaseLost, "the Session learns its end from a refused KeepAlive or its deadline")
}

// TestAmbiguousSharedAcquireReleasedByOwner: the background clean-up after
// an ambiguous acquire finds its own holder among several.
func TestAmbiguousSharedAcquireReleasedByOwner(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints(), sdk.WithRequestTimeout(100*time.Millisecond))
	ctx := testCtx(t)
	other, err := c.RLock(ctx, "k")
	require.NoError(t, err)
	fc.setHook(func(ctx context.Context, method string, req any) error {
		if method == "Acquire" {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = c.TryRLock(actx, "k")
	require.ErrorIs(t, err, sdk.ErrAmbiguous)
	fc.setHook(nil)
	require.Eventually(t, func() bool { return len(fc.holders("k")) == 1 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, other.Token(), fc.holders("k")[0].GetToken(), "only the ambiguous grant was released")
}

// TestCloseDuringDefaultSessionCreation: Close does not wait for a default
// session whose creation hangs (a Lock without deadline against a stuck
// cluster); the Lock fails with ErrClosed.
func TestCloseDuringDefaultSessionCreation(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.setHook(func(ctx context.Context, method string, req any) error {
		if method == "CreateSession" {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	c, err := sdk.New(fc.endpoints(), sdk.WithRequestTimeout(time.Hour))
	require.NoError(t, err)
	res := make(chan error, 1)
	go func() {
		_, err := c.RLock(context.Background(), "k") // no deadline: only Close ends it
		res <- err
	}()
	require.Eventually(t, func() bool { return len(fc.callsTo("CreateSession")) == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, c.Close())
	assert.ErrorIs(t, <-res, sdk.ErrClosed)
}

// TestOwnRetryAsksTheSameMode: every attempt of one call carries the same
// owner id, so each must ask the same mode and session, or the servers
// refuse it (a same-owner request of another kind is no retry). A shared
// lock under the default session whose first reply is lost is retried with
// the same request and finds its own grant; an exclusive Acquire by that
// owner is refused and not retried.
func TestOwnRetryAsksTheSameMode(t *testing.T) {
	fc := newFakeCluster(t, 1)
	var n atomic.Int32
	var mu sync.Mutex
	var sent []*ticketv1.AcquireRequest
	fc.setHook(func(ctx context.Context, method string, req any) error {
		if method != "Acquire" {
			return nil
		}
		mu.Lock()
		sent = append(sent, proto.Clone(req.(*ticketv1.AcquireRequest)).(*ticketv1.AcquireRequest))
		mu.Unlock()
		if n.Add(1) == 1 {
			<-ctx.Done() // granted, but the reply is lost
			return ctx.Err()
		}
		return nil
	})
	c := newClient(t, fc.endpoints(), sdk.WithRequestTimeout(200*time.Millisecond))
	ctx := testCtx(t)
	l, err := c.TryRLock(ctx, "data", sdk.WithOwner("reader-1"))
	require.NoError(t, err, "the retry finds its own shared grant")
	assert.Equal(t, uint64(1), fc.tokens(), "one grant only")
	mu.Lock()
	require.Len(t, sent, 2)
	assert.True(t, proto.Equal(sent[0], sent[1]), "the retry asks what the first attempt asked: %v, %v", sent[0], sent[1])
	mu.Unlock()

	_, err = c.Acquire(ctx, "data", 10*time.Second, sdk.WithOwner("reader-1"))
	require.Error(t, err)
	assert.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err))
	assert.Len(t, fc.callsTo("Acquire"), 3, "a refusal is final, not retried")
	require.NoError(t, l.Unlock(ctx))
}
