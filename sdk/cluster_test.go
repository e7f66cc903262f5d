package sdk_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// clusterArgs make elections quick, so that failover tests stay short.
var clusterArgs = []string{"--raft-election-timeout-ms=500", "--raft-heartbeat-ms=50"}

// TestRealCluster runs the SDK against a real three-node ticketd cluster:
// separate processes on loopback, hashicorp backend unless
// TICKETDTEST_BACKEND=etcd. The subtests share the cluster and run in
// order; each uses its own keys, and a subtest that harms a node restores
// it before returning.
func TestRealCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a ticketd cluster")
	}
	cl := ticketdtest.Start(t, ticketdtest.Options{Nodes: 3, Backend: os.Getenv("TICKETDTEST_BACKEND"), Args: clusterArgs})
	var eps []string
	for i := range cl.Len() {
		eps = append(eps, cl.Node(i).APIAddr)
	}

	t.Run("lock_unlock_trylock", func(t *testing.T) { testRoundTrip(t, eps) })
	t.Run("grpc_protocol", func(t *testing.T) { testGRPC(t, eps) })
	t.Run("session_get_list", func(t *testing.T) { testSessionReads(t, eps) })
	t.Run("fifo_waiters", func(t *testing.T) { testFIFO(t, cl, eps) })
	t.Run("lease_survives_leader_kill", func(t *testing.T) { testLeaderKill(t, cl, eps) })
	t.Run("cut_off_client_loses_lease_before_regrant", func(t *testing.T) { testCutOff(t, eps) })
	t.Run("done_before_server_expiry_across_failovers", func(t *testing.T) { testDoneBeforeServerExpiry(t, cl, eps) })
}

func testRoundTrip(t *testing.T, eps []string) {
	c := newClient(t, eps)
	ctx := testCtx(t)

	l, err := c.Lock(ctx, "rt/a", 5*time.Second)
	require.NoError(t, err)
	assert.NotZero(t, l.Token())
	assert.Equal(t, 5*time.Second, l.TTL())

	_, err = c.TryLock(ctx, "rt/a", 5*time.Second)
	assert.ErrorIs(t, err, sdk.ErrLocked)

	info, err := c.GetLock(ctx, "rt/a")
	require.NoError(t, err)
	assert.True(t, info.Held)
	assert.Equal(t, l.Token(), info.Token)
	assert.Equal(t, l.Owner(), info.Owner)
	valid, cur, err := c.Check(ctx, "rt/a", l.Token())
	require.NoError(t, err)
	assert.True(t, valid)
	assert.Equal(t, l.Token(), cur)

	require.NoError(t, l.Unlock(ctx))
	<-l.Done()
	assert.ErrorIs(t, l.Err(), sdk.ErrReleased)
	info, err = c.GetLock(ctx, "rt/a")
	require.NoError(t, err)
	assert.False(t, info.Held)

	l2, err := c.TryLock(ctx, "rt/a", 5*time.Second)
	require.NoError(t, err)
	assert.Greater(t, l2.Token(), l.Token(), "fencing tokens increase")
	valid, cur, err = c.Check(ctx, "rt/a", l.Token())
	require.NoError(t, err)
	assert.False(t, valid)
	assert.Equal(t, l2.Token(), cur)
	assert.NoError(t, l.Unlock(ctx), "Unlock after Unlock is a no-op")
	require.NoError(t, l2.Unlock(ctx))

	// The leader serves Acquire directly: no forwarding needed.
	st, err := c.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, st.GetLeaderAddr(), c.Leader(), "Leader is host:port, as New was given")
	c2, err := sdk.New([]string{c.Leader()})
	require.NoError(t, err, "Leader's result goes back into New")
	defer c2.Close()

	var urls []string
	for _, e := range eps {
		urls = append(urls, "http://"+e)
	}
	cu := newClient(t, urls)
	_, err = cu.GetLock(ctx, "rt/a")
	require.NoError(t, err)
	assert.Equal(t, "http://"+st.GetLeaderAddr(), cu.Leader(), "a client made with URLs gets a URL")
}

func testGRPC(t *testing.T, eps []string) {
	c := newClient(t, eps, sdk.WithGRPC())
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "grpc/a", 5*time.Second)
	require.NoError(t, err)
	_, err = c.TryLock(ctx, "grpc/a", 5*time.Second)
	assert.ErrorIs(t, err, sdk.ErrLocked)
	require.NoError(t, l.Unlock(ctx))
}

func testFIFO(t *testing.T, cl *ticketdtest.Cluster, eps []string) {
	const n = 4
	c := newClient(t, eps)
	ctx := testCtx(t)
	leader := cl.Leader(t)

	holder, err := c.TryLock(ctx, "fifo/a", 10*time.Second)
	require.NoError(t, err)
	type grant struct {
		waiter int
		token  uint64
	}
	granted := make(chan grant, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Lock(ctx, "fifo/a", 10*time.Second)
			if !assert.NoError(t, err) {
				return
			}
			granted <- grant{waiter: i, token: l.Token()}
			assert.NoError(t, l.Unlock(ctx))
		}()
		// Start the next waiter only once this one is queued on the leader.
		require.Eventually(t, func() bool {
			v, err := cl.Metric(leader, "ticketd_waiters")
			return err == nil && v == float64(i+1)
		}, 10*time.Second, 5*time.Millisecond,
			"waiter %d never queued", i)
	}
	require.NoError(t, holder.Unlock(ctx))
	wg.Wait()
	close(granted)
	var order []int
	last := holder.Token()
	for g := range granted {
		order = append(order, g.waiter)
		assert.Greater(t, g.token, last)
		last = g.token
	}
	assert.Equal(t, []int{0, 1, 2, 3}, order, "waiters are granted in arrival order")
}

// ackRecorder is a client interceptor that records, for every Acquire or
// Renew that succeeds, the time just before it was handed to the transport.
// That is at or after the SDK's own send time and before the server saw the
// request, so the server cannot expire that lease before it + TTL.
type ackRecorder struct {
	mu   sync.Mutex
	acks []time.Time
}

func (r *ackRecorder) interceptor() connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			sent := time.Now()
			res, err := next(ctx, req)
			p := req.Spec().Procedure
			if err == nil && (p == ticketv1connect.LockServiceRenewProcedure || p == ticketv1connect.LockServiceAcquireProcedure) {
				r.mu.Lock()
				r.acks = append(r.acks, sent)
				r.mu.Unlock()
			}
			return res, err
		}
	})
}

// since returns how many acknowledgements were sent after t, and the last one.
func (r *ackRecorder) since(t time.Time) (int, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, last := 0, time.Time{}
	for _, a := range r.acks {
		if a.After(t) {
			n++
		}
		if a.After(last) {
			last = a
		}
	}
	return n, last
}

// firstAfter returns the first acknowledgement sent after t.
func firstAfter(r *ackRecorder, t time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.acks {
		if a.After(t) {
			return a
		}
	}
	return time.Time{}
}

func testLeaderKill(t *testing.T, cl *ticketdtest.Cluster, eps []string) {
	const ttl = 5 * time.Second
	rec := &ackRecorder{}
	c := newClient(t, eps, sdk.WithConnectOptions(connect.WithInterceptors(rec.interceptor())))
	ctx := testCtx(t)

	l, err := c.Lock(ctx, "kill/a", ttl)
	require.NoError(t, err)
	start := time.Now()
	require.Eventually(t, func() bool { n, _ := rec.since(start); return n >= 1 }, 2*ttl, 10*time.Millisecond, "no renewal")

	old := cl.Leader(t)
	killed := time.Now()
	cl.Kill(old)
	restored := false
	defer func() {
		if !restored { // a failed assertion: give the next subtests three nodes
			cl.Restart(old)
			cl.WaitLeader(t, 30*time.Second)
		}
	}()
	require.Eventually(t, func() bool { n, _ := rec.since(killed); return n >= 2 }, 4*ttl, 10*time.Millisecond,
		"no renewal through the new leader")
	t.Logf("first renewal through the new leader was sent %.2f TTLs after the kill", float64(firstAfter(rec, killed).Sub(killed))/float64(ttl))

	select {
	case <-l.Done():
		t.Fatalf("lease lost across the failover: %v", l.Err())
	default:
	}
	require.NoError(t, l.Err())
	info, err := c.GetLock(ctx, "kill/a")
	require.NoError(t, err)
	assert.Equal(t, l.Token(), info.Token, "same grant after failover")
	assert.NotEqual(t, cl.Node(old).APIAddr, c.Leader())
	require.NoError(t, l.Unlock(ctx))

	cl.Restart(old)
	cl.WaitLeader(t, 30*time.Second)
	restored = true
}

// cutter is a dialer whose connections can all be cut at once: the client
// is then partitioned from every node while the cluster keeps running.
type cutter struct {
	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

var errCut = errors.New("cutter: network cut")

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	cut := c.cut
	c.mu.Unlock()
	if cut {
		return nil, errCut
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		conn.Close()
		return nil, errCut
	}
	c.conns[conn] = struct{}{}
	return conn, nil
}

// setCut cuts (closing every open connection) or heals the network.
func (c *cutter) setCut(cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = cut
	if cut {
		for conn := range c.conns {
			conn.Close()
		}
		clear(c.conns)
	}
}

func (c *cutter) client() *http.Client {
	tr := &http.Transport{DialContext: c.dial, HTTP2: &http.HTTP2Config{SendPingTimeout: time.Second, PingTimeout: time.Second}}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}

func testCutOff(t *testing.T, eps []string) {
	const ttl = 2 * time.Second
	cut := &cutter{conns: map[net.Conn]struct{}{}}
	rec := &ackRecorder{}
	hc := cut.client()
	t.Cleanup(hc.CloseIdleConnections)
	a := newClient(t, eps, sdk.WithHTTPClient(hc), sdk.WithConnectOptions(connect.WithInterceptors(rec.interceptor())))
	b := newClient(t, eps)
	ctx := testCtx(t)

	la, err := a.TryLock(ctx, "cut/a", ttl)
	require.NoError(t, err)
	start := time.Now()
	require.Eventually(t, func() bool { n, _ := rec.since(start); return n >= 2 }, 4*ttl, 10*time.Millisecond, "no renewals")

	// b queues for the key; the server grants it as soon as a's lease ends.
	type result struct {
		l  *sdk.Lease
		at time.Time
	}
	bGot := make(chan result, 1)
	go func() {
		l, err := b.Lock(ctx, "cut/a", ttl)
		assert.NoError(t, err)
		bGot <- result{l, time.Now()}
	}()

	cut.setCut(true)
	<-la.Done()
	doneAt := time.Now()
	_, lastAck := rec.since(time.Time{})
	earliestRegrant := lastAck.Add(ttl)
	assert.ErrorIs(t, la.Err(), sdk.ErrLeaseLost)
	assert.True(t, doneAt.Before(earliestRegrant),
		"Done closed %v after the earliest moment the servers could re-grant the key", doneAt.Sub(earliestRegrant))
	assert.False(t, la.Deadline().After(earliestRegrant))

	rb := <-bGot
	require.NotNil(t, rb.l)
	assert.True(t, rb.at.After(doneAt), "b was granted the key before a's Done closed")
	assert.Greater(t, rb.l.Token(), la.Token())
	t.Logf("a's Done closed %.3f TTLs before the earliest possible re-grant; b was granted %.3f TTLs after Done",
		float64(earliestRegrant.Sub(doneAt))/float64(ttl), float64(rb.at.Sub(doneAt))/float64(ttl))

	// a stale Unlock, once a can reach the cluster again, leaves b's lock alone.
	cut.setCut(false)
	err = la.Unlock(ctx)
	assert.ErrorIs(t, err, sdk.ErrNotHeld)
	info, err := b.GetLock(ctx, "cut/a")
	require.NoError(t, err)
	assert.True(t, info.Held)
	assert.Equal(t, rb.l.Token(), info.Token, "the new holder keeps the key")
	select {
	case <-rb.l.Done():
		t.Fatalf("b's lease ended: %v", rb.l.Err())
	default:
	}
	require.NoError(t, rb.l.Unlock(ctx))
}

// testSessionReads: GetSession and ListSessions describe the client's
// sessions (TTL, remaining lease, locks), the key-prefix filter keeps the
// sessions holding a lock under it, and a closed session is
// ErrSessionNotFound.
func testSessionReads(t *testing.T, eps []string) {
	c := newClient(t, eps)
	ctx := testCtx(t)
	s1, err := c.CreateSession(ctx, 30*time.Second)
	require.NoError(t, err)
	s2, err := c.CreateSession(ctx, 20*time.Second)
	require.NoError(t, err)
	l, err := c.Lock(ctx, "sr/jobs/a", 0, sdk.WithSession(s2))
	require.NoError(t, err)

	info, err := c.GetSession(ctx, s2.ID())
	require.NoError(t, err)
	assert.Equal(t, s2.ID(), info.ID)
	assert.Equal(t, 20*time.Second, info.TTL)
	assert.Positive(t, info.Remaining)
	assert.LessOrEqual(t, info.Remaining, 20*time.Second)
	assert.Equal(t, []sdk.SessionLock{{Key: "sr/jobs/a", Token: l.Token(), Owner: l.Owner(), Mode: sdk.ModeExclusive}}, info.Locks)

	all, err := c.ListSessions(ctx, sdk.SessionFilter{})
	require.NoError(t, err)
	var ids []uint64
	for _, s := range all {
		ids = append(ids, s.ID)
	}
	assert.Subset(t, ids, []uint64{s1.ID(), s2.ID()})
	under, err := c.ListSessions(ctx, sdk.SessionFilter{KeyPrefix: "sr/jobs/"})
	require.NoError(t, err)
	require.Len(t, under, 1)
	assert.Equal(t, s2.ID(), under[0].ID)

	require.NoError(t, s2.Close(ctx))
	_, err = c.GetSession(ctx, s2.ID())
	assert.ErrorIs(t, err, sdk.ErrSessionNotFound)
	require.NoError(t, s1.Close(ctx))
}
