package sdk_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
)

// keepAliveNode is a lone leader that answers KeepAlive unary calls and,
// when streams is set, KeepAliveStream too, ending each stream without
// error after perStream messages (as a node ends an idle stream). It
// counts the unary calls, the streams opened and the messages answered
// on them.
type keepAliveNode struct {
	ticketv1connect.UnimplementedLockServiceHandler
	ticketv1connect.UnimplementedClusterServiceHandler
	self      string
	streams   bool
	perStream int

	unary, opened, answered, status atomic.Int64
}

func (k *keepAliveNode) Status(context.Context, *ticketv1.StatusRequest) (*ticketv1.StatusResponse, error) {
	k.status.Add(1)
	return &ticketv1.StatusResponse{NodeId: "a", LeaderId: "a", LeaderAddr: k.self,
		Members: []*ticketv1.Member{{Id: "a", ApiAddr: k.self, Voter: true}}}, nil
}

func (k *keepAliveNode) KeepAlive(_ context.Context, req *ticketv1.KeepAliveRequest) (*ticketv1.KeepAliveResponse, error) {
	k.unary.Add(1)
	return &ticketv1.KeepAliveResponse{TtlMs: 4000}, nil
}

func (k *keepAliveNode) KeepAliveStream(ctx context.Context, stream *connect.BidiStream[ticketv1.KeepAliveRequest, ticketv1.KeepAliveResponse]) error {
	if !k.streams {
		return k.UnimplementedLockServiceHandler.KeepAliveStream(ctx, stream)
	}
	k.opened.Add(1)
	for range k.perStream {
		if _, err := stream.Receive(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := stream.Send(&ticketv1.KeepAliveResponse{TtlMs: 3000}); err != nil {
			return err
		}
		k.answered.Add(1)
	}
	return nil
}

// startKeepAliveNode serves k over h2c and returns a client of it;
// procedures counts the requests per path.
func startKeepAliveNode(t *testing.T, k *keepAliveNode) (*sdk.Client, map[string]*atomic.Int64) {
	mux := http.NewServeMux()
	mux.Handle(ticketv1connect.NewLockServiceHandler(k))
	mux.Handle(ticketv1connect.NewClusterServiceHandler(k))
	procedures := map[string]*atomic.Int64{
		ticketv1connect.LockServiceKeepAliveStreamProcedure: {},
		ticketv1connect.LockServiceKeepAliveProcedure:       {},
	}
	srv := sdk.NewH2CServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := procedures[r.URL.Path]; n != nil {
			n.Add(1)
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	k.self = srv.Listener.Addr().String()
	return newClient(t, []string{k.self}, sdk.WithBackoff(5*time.Millisecond, 20*time.Millisecond)), procedures
}

// TestKeepAliveFallsBackToUnary: a node that answers KeepAliveStream with
// Unimplemented (an older ticketd) gets the keep-alive as a unary
// KeepAlive in the same call, and the next keep-alives go unary at once,
// without trying the stream again.
func TestKeepAliveFallsBackToUnary(t *testing.T) {
	k := &keepAliveNode{}
	c, procedures := startKeepAliveNode(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		ttl, err := c.KeepAlive(ctx, 7)
		require.NoError(t, err)
		assert.Equal(t, 4*time.Second, ttl, "the unary answer")
	}
	assert.Equal(t, int64(1), procedures[ticketv1connect.LockServiceKeepAliveStreamProcedure].Load(), "the stream was tried once")
	assert.Equal(t, int64(3), k.unary.Load(), "every keep-alive went unary")
}

// TestKeepAliveUsesOneStream: keep-alives of a session go over one stream
// (no unary call); a stream the node ended without error (idle) is
// replaced within the next keep-alive, which succeeds at once (no failed
// attempt: the client does not forget its leader and ask Status again);
// another session has a stream of its own.
func TestKeepAliveUsesOneStream(t *testing.T) {
	k := &keepAliveNode{streams: true, perStream: 3}
	c, procedures := startKeepAliveNode(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		ttl, err := c.KeepAlive(ctx, 7)
		require.NoError(t, err)
		assert.Equal(t, 3*time.Second, ttl, "the stream's answer")
	}
	assert.Equal(t, int64(1), k.opened.Load(), "three keep-alives, one stream")
	// The node has ended that stream (after its third message): the
	// next keep-alive finds it ended and opens another at once.
	asked := k.status.Load()
	_, err := c.KeepAlive(ctx, 7)
	require.NoError(t, err)
	assert.Equal(t, int64(2), k.opened.Load())
	assert.Equal(t, asked, k.status.Load(), "no attempt failed")
	_, err = c.KeepAlive(ctx, 8)
	require.NoError(t, err)
	assert.Equal(t, int64(3), k.opened.Load(), "another session, another stream")
	assert.Equal(t, int64(5), k.answered.Load())
	assert.Zero(t, k.unary.Load(), "no unary keep-alive")
	assert.Zero(t, procedures[ticketv1connect.LockServiceKeepAliveProcedure].Load())
}

// TestKeepAliveAttemptCutEndsItsStream: a keep-alive whose attempt times
// out before its answer ends its stream, and the retry goes on a new one
// and succeeds; the late answer to the first is never taken for a later
// keep-alive's (it went with the stream it was sent on).
func TestKeepAliveAttemptCutEndsItsStream(t *testing.T) {
	c := newFakeCluster(t, 1)
	cl := newClient(t, c.endpoints(), sdk.WithRequestTimeout(100*time.Millisecond), sdk.WithBackoff(5*time.Millisecond, 20*time.Millisecond))
	ctx := testCtx(t)
	s, err := cl.CreateSession(ctx, 10*time.Second)
	require.NoError(t, err)
	var slow atomic.Bool
	slow.Store(true)
	release := make(chan struct{})
	c.setHook(func(ctx context.Context, method string, _ any) error {
		if method == "KeepAlive" && slow.CompareAndSwap(true, false) {
			<-release // past the attempt's 100 ms: the client cuts the stream
		}
		return nil
	})
	t.Cleanup(func() { close(release) })
	// Without the cut the call waits for the late answer, which comes only
	// at the test's end: the test then fails by its timeout.
	ttl, err := cl.KeepAlive(ctx, s.ID())
	require.NoError(t, err)
	assert.Equal(t, 10*time.Second, ttl)
	keepAlives := 0
	c.mu.Lock()
	for _, call := range c.calls {
		if call.method == "KeepAlive" {
			keepAlives++
		}
	}
	c.mu.Unlock()
	assert.GreaterOrEqual(t, keepAlives, 2, "the first attempt was cut and retried")
}
