package server_test

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// healthWatchProcedure is gRPC health's server stream (grpchealth).
const healthWatchProcedure = "/grpc.health.v1.Health/Watch"

// streamHandlers are the handlers of the API's server streams, as
// runtime.Stack names their frames.
var streamHandlers = []string{
	"server.(*lockService).Watch", "server.(*clusterService).Snapshot", "grpchealth.(*handler).watch",
}

// TestStreamWriteLimitResetsStalledStreams: on a real node, a client that
// opens Watch, Snapshot and gRPC health's Watch on one HTTP/2 connection
// and never reads them (it grants no stream any flow-control window) has
// each stream reset (RST_STREAM) once its first message has waited
// limits.stream_write_timeout_ms, and not before; every handler returns,
// so the node runs no more goroutines than before the streams were
// opened (no watcher, snapshot or goroutine held for as long as the
// client keeps its connection); and the connection goes on: unary calls
// on it are answered, and a stream on it that reads gets its whole answer
// (docs/security.md#stalled-readers).
func TestStreamWriteLimitResetsStalledStreams(t *testing.T) {
	const limit = time.Second
	c := nodetest.Start(t, 1, withConfig(func(c *config.Config) { c.Limits.StreamWriteTimeoutMS = limit.Milliseconds() }))
	in := c.Nodes[0]
	ctx := ctxT(t)
	got, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "stall/a", LeaseMs: 60_000, Owner: "o"})
	require.NoError(t, err)

	raw := dialRawH2(t, in.Addr, 0)
	var st ticketv1.StatusResponse
	raw.unary(ticketv1connect.ClusterServiceStatusProcedure, &ticketv1.StatusRequest{}, &st) // the worker unary calls run on
	before := runtime.NumGoroutine()

	streams := map[string]uint32{
		"Watch":        raw.openStream(ticketv1connect.LockServiceWatchProcedure, &ticketv1.WatchRequest{Prefix: "stall/", IncludeExisting: true}),
		"Snapshot":     raw.openStream(ticketv1connect.ClusterServiceSnapshotProcedure, &ticketv1.SnapshotRequest{}),
		"health Watch": raw.openStream(healthWatchProcedure, nil),
	}
	for name, id := range streams {
		s := raw.awaitReset(id, name)
		require.Equal(t, "200", s.status, "%s: the node answered, then stalled on the first message", name)
		require.Empty(t, s.data, "%s: no byte without a window", name)
		require.GreaterOrEqual(t, s.resetAt.Sub(s.opened), limit, "%s: reset before its first message had the limit", name)
	}
	awaitNoGoroutineIn(t, streamHandlers...)
	awaitGoroutinesAtMost(t, before)

	// The connection goes on: unary calls on it are answered ...
	var lock ticketv1.GetLockResponse
	raw.unary(ticketv1connect.LockServiceGetLockProcedure, &ticketv1.GetLockRequest{Key: "stall/a"}, &lock)
	require.True(t, lock.GetHeld())
	require.Equal(t, got.GetToken(), lock.GetToken())
	// ... and a stream on it whose reader reads gets its whole answer.
	id := raw.openStream(ticketv1connect.ClusterServiceSnapshotProcedure, &ticketv1.SnapshotRequest{})
	raw.grant(id, 1<<30)
	raw.await("a snapshot read to its end", func() bool { return raw.streams[id].ended || raw.streams[id].reset })
	s := raw.streams[id]
	require.False(t, s.reset)
	msgs, end := connectMessages(s.data)
	require.NotEmpty(t, msgs)
	require.JSONEq(t, "{}", string(end), "the stream ends without an error")
	var first ticketv1.SnapshotChunk
	require.NoError(t, proto.Unmarshal(msgs[0], &first))
	require.NotNil(t, first.GetHeader())
}

// TestWatchOutlivesStreamWriteLimit: the stream write limit bounds each
// pending message, not a stream's life: a watch whose client reads, over
// HTTP/2 and over HTTP/1.1, stays open through idle gaps several times
// the limit and through changes spread over longer than it, and gets
// every event.
func TestWatchOutlivesStreamWriteLimit(t *testing.T) {
	t.Parallel()
	const limit = 500 * time.Millisecond
	c := nodetest.Start(t, 1, withConfig(func(c *config.Config) { c.Limits.StreamWriteTimeoutMS = limit.Milliseconds() }))
	in := c.Nodes[0]
	ctx := ctxT(t)
	h1 := &http.Transport{Protocols: new(http.Protocols)}
	h1.Protocols.SetHTTP1(true)
	t.Cleanup(h1.CloseIdleConnections)
	clients := map[string]ticketv1connect.LockServiceClient{
		"HTTP/2":   in.Lock,
		"HTTP/1.1": ticketv1connect.NewLockServiceClient(&http.Client{Transport: h1}, "http://"+in.Addr),
	}
	type watch struct {
		name   string
		stream *connect.ServerStreamForClient[ticketv1.WatchEvent]
	}
	var watches []watch
	for name, lc := range clients {
		stream, err := lc.Watch(ctx, &ticketv1.WatchRequest{Prefix: "idle/"})
		require.NoError(t, err)
		t.Cleanup(func() { _ = stream.Close() })
		require.True(t, stream.Receive(), "%s: %v", name, stream.Err())
		require.Equal(t, ticketv1.WatchEvent_TYPE_STARTED, stream.Msg().GetType())
		watches = append(watches, watch{name, stream})
	}
	for round := range 3 {
		// The gap under test: nothing to send for longer than the limit.
		time.Sleep(3 * limit)
		key := fmt.Sprintf("idle/%d", round)
		got, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: 60_000, Owner: "o"})
		require.NoError(t, err)
		for _, w := range watches {
			require.True(t, w.stream.Receive(), "%s, after a gap of %v: %v", w.name, 3*limit, w.stream.Err())
			ev := w.stream.Msg()
			require.Equal(t, ticketv1.WatchEvent_TYPE_GRANTED, ev.GetType(), w.name)
			require.Equal(t, key, ev.GetKey(), w.name)
			require.Equal(t, got.GetToken(), ev.GetToken(), w.name)
		}
	}
}

// TestWatchEndedAsSlowEndsWithinStreamWriteLimit: once the hub ends a
// watcher as too slow, what its stream still writes (the events in its
// buffer, then the error) is bounded whole by one stream write limit, not
// one per message: a client that reads just under the per-message limit,
// a message at a time, has the stream reset one limit after the watch
// ended instead of keeping the handler and the buffer for a limit per
// buffered event. The client opens its window by about one event a
// second (each message then waits about a second, well under the 3 s
// limit); draining eight events would take it about eight seconds.
func TestWatchEndedAsSlowEndsWithinStreamWriteLimit(t *testing.T) {
	const (
		limit  = 3 * time.Second
		buffer = 12 // events per watcher
		locks  = 8  // per session: two sessions' ends do not fit the buffer
	)
	c := nodetest.Start(t, 1, withConfig(func(c *config.Config) {
		c.Limits.StreamWriteTimeoutMS = limit.Milliseconds()
		c.Limits.WatchBufferEvents, c.Limits.MaxLocksPerSession = buffer, buffer
	}))
	in := c.Nodes[0]
	ctx := ctxT(t)
	long := strings.Repeat("k", 900) // an event of about 950 bytes
	var sessions []uint64
	for s := range 2 {
		cs, err := in.Lock.CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 60_000})
		require.NoError(t, err)
		sessions = append(sessions, cs.GetSession())
		for i := range locks {
			_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{
				Key: fmt.Sprintf("slow/%d/%02d/%s", s, i, long), LeaseMs: 60_000, Owner: fmt.Sprintf("o%d", s), Session: cs.GetSession()})
			require.NoError(t, err)
		}
	}

	raw := dialRawH2(t, in.Addr, 0)
	id := raw.openStream(ticketv1connect.LockServiceWatchProcedure, &ticketv1.WatchRequest{Prefix: "slow/", Stale: true})
	raw.await("the watch's headers", func() bool { return raw.streams[id].status != "" || raw.streams[id].reset })
	require.Equal(t, "200", raw.streams[id].status)
	// The handler waits to send STARTED: the first session's end fills
	// eight of the twelve places of its buffer, the second's does not fit
	// and the hub ends the watcher as too slow.
	for _, s := range sessions {
		_, err := in.Lock.CloseSession(ctx, &ticketv1.CloseSessionRequest{Session: s})
		require.NoError(t, err)
	}

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	s := raw.streams[id]
	deadline := time.After(safety)
	for !s.reset && !s.ended {
		require.NoError(t, raw.err)
		select {
		case f := <-raw.frames:
			raw.apply(f)
		case <-tick.C:
			raw.grant(id, 1024)
		case <-deadline:
			require.FailNow(t, "timed out", "the stream neither reset nor ended within %v", safety)
		}
	}
	msgs, end := connectMessages(s.data)
	require.True(t, s.reset, "reset before the buffered events were all sent; got %d messages and the end %s", len(msgs), end)
	require.Less(t, len(msgs), 1+locks, "STARTED and fewer than the %d buffered events", locks)
	awaitNoGoroutineIn(t, streamHandlers...)
}
