package server_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/backends"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/memraft"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// safety bounds waits for asynchronous effects; assertions never depend on it.
const safety = 15 * time.Second

// memNode starts one node over the in-memory consensus stand-in, for tests
// of the server's own logic (demotion and held proposals on demand).
func memNode(t testing.TB, opts ...nodetest.Option) (*nodetest.Instance, *memraft.Node) {
	t.Helper()
	return memNodeWith(t, nil, opts...)
}

// memNodeWith is memNode with extra server options (a fake clock).
func memNodeWith(t testing.TB, extra []server.Option, opts ...nodetest.Option) (*nodetest.Instance, *memraft.Node) {
	t.Helper()
	var mem *memraft.Node
	opts = append([]nodetest.Option{nodetest.WithServerOptions(func(int) []server.Option {
		return append([]server.Option{server.WithBackend(func(cfg backends.Config) (server.Backend, error) {
			n, err := memraft.New(cfg)
			mem = n
			return n, err
		})}, extra...)
	})}, opts...)
	c := nodetest.Start(t, 1, opts...)
	return c.Nodes[0], mem
}

func withConfig(fn func(c *config.Config)) nodetest.Option {
	return nodetest.WithConfig(func(_ int, c *config.Config) { fn(c) })
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	t.Cleanup(cancel)
	return ctx
}

// snapshot is the part of Status that any change to the lock table moves.
type snapshot struct {
	LastToken    uint64
	LocksHeld    int64
	AppliedIndex uint64
}

func state(t *testing.T, in *nodetest.Instance) snapshot {
	t.Helper()
	st, err := in.Cluster.Status(ctxT(t), &ticketv1.StatusRequest{})
	require.NoError(t, err)
	return snapshot{st.GetLastToken(), st.GetLocksHeld(), st.GetAppliedIndex()}
}

func requireCode(t *testing.T, want connect.Code, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, want.String(), connect.CodeOf(err).String(), "error: %v", err)
}

// leaderHint returns the LeaderHint detail of err, if any.
func leaderHint(err error) (*ticketv1.LeaderHint, bool) {
	var ce *connect.Error
	if !asConnect(err, &ce) {
		return nil, false
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if h, ok := v.(*ticketv1.LeaderHint); ok {
				return h, true
			}
		}
	}
	return nil, false
}

func asConnect(err error, target **connect.Error) bool {
	ce, ok := err.(*connect.Error)
	if ok {
		*target = ce
	}
	return ok
}

// metric reads one sample from a node's /metrics (nodetest.Metric).
func metric(t *testing.T, in *nodetest.Instance, name string) float64 {
	t.Helper()
	return nodetest.Metric(t, in.Addr, name)
}

// waitCanceled waits until the node has seen n Acquire calls end with
// Canceled (its client went away).
func waitCanceled(t *testing.T, in *nodetest.Instance, n int) {
	t.Helper()
	name := `ticketd_rpc_requests_total{code="canceled",procedure="/ticket.v1.LockService/Acquire"}`
	eventually(t, func() bool { return metric(t, in, name) == float64(n) }, "server-side cancellation")
}

// eventually polls cond every 5ms until it holds or safety passes.
func eventually(t testing.TB, cond func() bool, msg string) {
	t.Helper()
	eventuallyWithin(t, safety, cond, msg)
}

// eventuallyWithin is eventually with a bound of its own, for conditions
// that take rounds of the server's own timers (a restart, a probe).
func eventuallyWithin(t testing.TB, bound time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out: " + msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitWaiters waits until the node's queues hold n waiting requests.
func waitWaiters(t *testing.T, in *nodetest.Instance, n int) {
	t.Helper()
	eventually(t, func() bool { return metric(t, in, "ticketd_waiters") == float64(n) }, "waiters")
}

type acquired struct {
	name string
	res  *ticketv1.AcquireResponse
	err  error
	at   time.Time
}

// acquireAsync sends Acquire in a goroutine and reports on out.
func acquireAsync(ctx context.Context, in *nodetest.Instance, name string, req *ticketv1.AcquireRequest, out chan<- acquired) {
	go func() {
		res, err := in.Lock.Acquire(ctx, req)
		out <- acquired{name: name, res: res, err: err, at: time.Now()}
	}()
}

func recvAcquired(t *testing.T, ch <-chan acquired) acquired {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(safety):
		t.Fatal("no Acquire returned")
		return acquired{}
	}
}

func held(t *testing.T, in *nodetest.Instance, key string) *ticketv1.GetLockResponse {
	t.Helper()
	res, err := in.Lock.GetLock(ctxT(t), &ticketv1.GetLockRequest{Key: key})
	require.NoError(t, err)
	return res
}

var _ = assert.Equal

// receiveStarted receives a Watch stream's STARTED announcement and returns
// the index it starts after: the changes a test makes after this follow on
// the stream (docs/api.md#watch).
func receiveStarted(t *testing.T, stream *connect.ServerStreamForClient[ticketv1.WatchEvent]) uint64 {
	t.Helper()
	require.True(t, stream.Receive(), "watch: %v", stream.Err())
	require.Equal(t, ticketv1.WatchEvent_TYPE_STARTED, stream.Msg().GetType(), "the first message announces the start")
	return stream.Msg().GetIndex()
}
