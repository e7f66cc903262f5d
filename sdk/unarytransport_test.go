package sdk_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// requireProtos checks the HTTP major version of every request of each
// procedure named in want, as the fake cluster's nodes saw them.
func requireProtos(t *testing.T, got map[string][]int, want map[string]int) {
	t.Helper()
	for proc, major := range want {
		require.NotEmpty(t, got[proc], "no %s request", proc)
		for _, m := range got[proc] {
			assert.Equal(t, major, m, "%s over HTTP/%d", proc, m)
		}
	}
}

// watchOnce opens a watch of prefix and returns after its first event.
func watchOnce(t *testing.T, c *sdk.Client, prefix string) {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	for _, err := range c.Watch(ctx, prefix, sdk.WithStartedEvents()) {
		require.NoError(t, err)
		return
	}
}

// TestUnaryCallsOverHTTP1StreamsOverHTTP2: the built-in transport sends
// unary calls bounded by the request timeout over HTTP/1.1, and a Lock
// that may wait beyond it (its ctx is longer) and Watch streams over HTTP/2
// (docs/design.md#sdk-transport).
func TestUnaryCallsOverHTTP1StreamsOverHTTP2(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	ctx := testCtx(t) // 20 s: beyond the request timeout (5 s)

	l, err := c.TryLock(ctx, "proto/a", 5*time.Second)
	require.NoError(t, err)
	_, err = c.GetLock(ctx, "proto/a")
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	requireProtos(t, fc.takeProtos(), map[string]int{"Status": 1, "Acquire": 1, "GetLock": 1, "Release": 1})

	l, err = c.Lock(ctx, "proto/b", 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	requireProtos(t, fc.takeProtos(), map[string]int{"Acquire": 2, "Release": 1})

	watchOnce(t, c, "proto/")
	requireProtos(t, fc.takeProtos(), map[string]int{"Watch": 2})
}

// TestUnaryCallsOverHTTP1WithTLS: over https the unary calls negotiate
// HTTP/1.1 by ALPN with a server that offers h2 as well, and streams HTTP/2.
func TestUnaryCallsOverHTTP1WithTLS(t *testing.T) {
	fc := newFakeCluster(t, 0)
	fn := &fakeNode{c: fc}
	fn.srv = httptest.NewUnstartedServer(fn.handler())
	fn.srv.EnableHTTP2 = true
	fn.srv.StartTLS()
	fc.nodes = append(fc.nodes, fn) // closed with the cluster
	pool := x509.NewCertPool()
	pool.AddCert(fn.srv.Certificate())
	c := newClient(t, fc.endpoints(), sdk.WithTLS(&tls.Config{RootCAs: pool}))
	ctx := testCtx(t)

	l, err := c.TryLock(ctx, "tls/a", 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	watchOnce(t, c, "tls/")
	requireProtos(t, fc.takeProtos(), map[string]int{"Status": 1, "Acquire": 1, "Release": 1, "Watch": 2})
}

// TestSilentNodeFailsOver: a node that accepts connections and answers
// nothing (a stopped process: its kernel completes the handshake and takes
// the request's bytes) fails an HTTP/1.1 call once a liveness probe goes
// unanswered, within twice the keep-alive as HTTP/2's pings would, not
// when the attempt's timeout (a minute here) runs out; the call then
// succeeds on the next node, well within its ctx.
func TestSilentNodeFailsOver(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0") // never accepts
	require.NoError(t, err)
	t.Cleanup(func() { _ = silent.Close() })
	fc := newFakeCluster(t, 1)
	c := newClient(t, []string{silent.Addr().String(), fc.addr(0)},
		sdk.WithKeepAlive(200*time.Millisecond), sdk.WithRequestTimeout(time.Minute))
	ctx := testCtx(t) // 20 s, a third of one attempt's timeout

	l, err := c.TryLock(ctx, "silent/a", 5*time.Second)
	require.NoError(t, err, "the call to the silent node failed over")
	require.NoError(t, l.Unlock(ctx))
	requireProtos(t, fc.takeProtos(), map[string]int{"Acquire": 1})
}

// TestSlowCallOnLiveNodeIsNotCut: a call whose answer takes several
// keep-alives on a node that answers its liveness probes is not failed:
// only silence is.
func TestSlowCallOnLiveNodeIsNotCut(t *testing.T) {
	fc := newFakeCluster(t, 1)
	probes := func() int {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		return len(fc.protos["livez"])
	}
	fc.setHook(func(ctx context.Context, method string, _ any) error {
		if method != "Acquire" {
			return nil
		}
		// Answer once the client has probed the node twice.
		for probes() < 2 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
		return nil
	})
	c := newClient(t, fc.endpoints(), sdk.WithKeepAlive(100*time.Millisecond))
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "slow/a", 5*time.Second)
	require.NoError(t, err)
	fc.setHook(nil)
	require.NoError(t, l.Unlock(ctx))
	got := fc.takeProtos()
	assert.Len(t, got["Acquire"], 1, "answered on the first attempt")
	requireProtos(t, got, map[string]int{"Acquire": 1, "livez": 2})
}

// testPausedLeader: with the leader stopped (SIGSTOP), a call of a client
// that knew it as leader moves to the new leader once its liveness probe
// goes unanswered, although one attempt may take a minute.
func testPausedLeader(t *testing.T, cl *ticketdtest.Cluster, eps []string) {
	c := newClient(t, eps, sdk.WithKeepAlive(250*time.Millisecond), sdk.WithRequestTimeout(time.Minute))
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "paused/a", 10*time.Second)
	require.NoError(t, err)

	old := cl.Leader(t)
	cl.Stop(old)
	defer func() {
		cl.Cont(old)
		cl.WaitLeader(t, 30*time.Second)
	}()
	l2, err := c.TryLock(ctx, "paused/b", 10*time.Second)
	require.NoError(t, err, "the call to the stopped leader failed over")
	assert.NotEqual(t, cl.Node(old).APIAddr, c.Leader())
	require.NoError(t, l2.Unlock(ctx))
	require.NoError(t, l.Unlock(ctx))
}
