package server_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// keepAliveStream is a KeepAliveStream a test drives by hand.
type keepAliveStream = connect.BidiStreamForClientSimple[ticketv1.KeepAliveRequest, ticketv1.KeepAliveResponse]

// openKeepAlives opens a KeepAliveStream with lc, ended when the test ends.
func openKeepAlives(t *testing.T, lc ticketv1connect.LockServiceClient) *keepAliveStream {
	t.Helper()
	ctx, cancel := context.WithCancel(ctxT(t))
	st, err := lc.KeepAliveStream(ctx)
	require.NoError(t, err)
	t.Cleanup(func() {
		cancel()
		_ = st.CloseResponse()
	})
	return st
}

// send sends a keep-alive of session on st.
func send(t *testing.T, st *keepAliveStream, session uint64) {
	t.Helper()
	require.NoError(t, st.Send(&ticketv1.KeepAliveRequest{Session: session}))
}

// answer receives the next answer on st and returns its ttl_ms.
func answer(t *testing.T, st *keepAliveStream) int64 {
	t.Helper()
	res, err := st.Receive()
	require.NoError(t, err)
	return res.GetTtlMs()
}

// streamEnd sends a keep-alive of session on st (the send may find the
// stream ended already) and returns the error the stream ends with.
func streamEnd(t *testing.T, st *keepAliveStream, session uint64) error {
	t.Helper()
	if err := st.Send(&ticketv1.KeepAliveRequest{Session: session}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_, err := st.Receive()
	require.Error(t, err, "the stream answered")
	return err
}

// streamAnswered is how many keep-alives in answered on streams.
func streamAnswered(t *testing.T, in *nodetest.Instance) float64 {
	return metric(t, in, "ticketd_keepalive_stream_messages_total")
}

// TestKeepAliveStreamAnswersInOrder: on a real three-node cluster of each
// backend, the leader answers every message of a KeepAliveStream with the
// TTL of the session it names, in the order sent (three sent before any
// answer is read), each one a replicated commit: the applied index moves
// past one entry per keep-alive, and the session's lock is held with a
// lease restarted by them.
func TestKeepAliveStreamAnswersInOrder(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) {
			c := nodetest.Start(t, 3, nodetest.WithBackend(backend))
			leader := c.Leader(t)
			a, b := createSession(t, leader, 5000), createSession(t, leader, 7000)
			acquireUnder(t, leader, "ka/a", a)
			st := openKeepAlives(t, leader.Lock)

			send(t, st, a)
			require.Equal(t, int64(5000), answer(t, st))
			before := state(t, leader).AppliedIndex
			for _, s := range []uint64{a, b, a} {
				send(t, st, s)
			}
			assert.Equal(t, []int64{5000, 7000, 5000}, []int64{answer(t, st), answer(t, st), answer(t, st)}, "answers in order")
			assert.GreaterOrEqual(t, state(t, leader).AppliedIndex, before+3, "one commit per keep-alive")
			assert.Equal(t, 4.0, streamAnswered(t, leader))
			got := held(t, leader, "ka/a")
			assert.Greater(t, got.GetRemainingMs(), int64(0))
			assert.Equal(t, a, got.GetHolders()[0].GetSession())
			require.NoError(t, st.CloseRequest())
			_, err := st.Receive()
			require.ErrorIs(t, err, io.EOF, "the client closing its side ends the stream without error")
		})
	}
}

// twoPrincipals starts a node with authorization on (withSessionAuth; at
// most maxPerPrincipal sessions per principal, 0: the default) and opens a
// session each for alice and bob through clients that send their bearer
// tokens (bearer).
func twoPrincipals(t *testing.T, maxPerPrincipal int) (in *nodetest.Instance, alice ticketv1connect.LockServiceClient, sa uint64, bob ticketv1connect.LockServiceClient, sb uint64) {
	t.Helper()
	in, _ = memNode(t, withConfig(func(c *config.Config) {
		withSessionAuth(t, c)
		if maxPerPrincipal > 0 {
			c.Limits.MaxSessionsPerPrincipal = maxPerPrincipal
		}
	}), nodetest.WithClientOptions(bearer("ops")))
	ctx := ctxT(t)
	alice = ticketv1connect.NewLockServiceClient(nodetest.H2CClient(), "http://"+in.Addr, bearer("alice"))
	bob = ticketv1connect.NewLockServiceClient(nodetest.H2CClient(), "http://"+in.Addr, bearer("bob"))
	var err error
	sa, err = openSession(ctx, alice)
	require.NoError(t, err)
	sb, err = openSession(ctx, bob)
	require.NoError(t, err)
	return in, alice, sa, bob, sb
}

// TestKeepAliveStreamChecksOwnerPerMessage: with authorization on, every
// message of a stream is checked as a unary KeepAlive is: alice keeps her
// session alive on her stream, and the first message naming bob's session
// ends the stream with NotFound, the answer an unknown session gets,
// without a log entry: bob's session is not kept alive. A stream without
// credentials is Unauthenticated.
func TestKeepAliveStreamChecksOwnerPerMessage(t *testing.T) {
	t.Parallel()
	in, alice, sa, bob, sb := twoPrincipals(t, 0)

	st := openKeepAlives(t, alice)
	send(t, st, sa)
	require.Equal(t, int64(10_000), answer(t, st))
	before := state(t, in)
	err := streamEnd(t, st, sb)
	requireCode(t, connect.CodeNotFound, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("session %d not found", sb))
	assert.Equal(t, before, state(t, in), "the refused keep-alive wrote nothing")

	// Bob's own stream keeps his session alive.
	bs := openKeepAlives(t, bob)
	send(t, bs, sb)
	require.Equal(t, int64(10_000), answer(t, bs))

	anon := openKeepAlives(t, ticketv1connect.NewLockServiceClient(nodetest.H2CClient(), "http://"+in.Addr))
	requireCode(t, connect.CodeUnauthenticated, streamEnd(t, anon, sa))
}

// TestKeepAliveStreamOnFollower: a follower does not forward a stream: it
// ends it with Unavailable and a LeaderHint naming the leader as soon as
// it opens (before any message), and writes nothing.
func TestKeepAliveStreamOnFollower(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, 3)
	leader := c.Leader(t)
	id := createSession(t, leader, 5000)
	follower := c.Follower(t)
	before := state(t, leader).AppliedIndex

	st := openKeepAlives(t, follower.Lock)
	require.NoError(t, st.Send(nil)) // the headers alone: no keep-alive
	_, err := st.Receive()
	requireCode(t, connect.CodeUnavailable, err)
	hint, ok := leaderHint(err)
	require.True(t, ok, "a LeaderHint detail: %v", err)
	assert.Equal(t, leader.ID, hint.GetLeaderId())
	assert.Equal(t, leader.Addr, hint.GetLeaderAddr())
	// A keep-alive sent at once gets the same end.
	err = streamEnd(t, openKeepAlives(t, follower.Lock), id)
	requireCode(t, connect.CodeUnavailable, err)
	_, ok = leaderHint(err)
	require.True(t, ok, "a LeaderHint detail: %v", err)
	assert.Equal(t, before, state(t, leader).AppliedIndex, "nothing written")
	assert.Zero(t, streamAnswered(t, follower))
}

// TestKeepAliveStreamBadInput: session 0, an unknown session and a
// message over the request size limit (1 MiB) each end the stream with
// the code the unary call gets (InvalidArgument naming the field,
// NotFound, ResourceExhausted) and change nothing.
func TestKeepAliveStreamBadInput(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t)
	id := createSession(t, in, 5000)
	before := state(t, in)

	err := streamEnd(t, openKeepAlives(t, in.Lock), 0)
	requireCode(t, connect.CodeInvalidArgument, err)
	var ce *connect.Error
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, "session", ce.Meta().Get("Ticketd-Invalid-Field"))

	requireCode(t, connect.CodeNotFound, streamEnd(t, openKeepAlives(t, in.Lock), id+1000))

	big := &ticketv1.KeepAliveRequest{Session: id}
	big.ProtoReflect().SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, 99, protowire.BytesType), make([]byte, 1<<20)))
	st := openKeepAlives(t, in.Lock)
	if err := st.Send(big); err != nil {
		require.ErrorIs(t, err, io.EOF)
	}
	_, err = st.Receive()
	requireCode(t, connect.CodeResourceExhausted, err)
	assert.Equal(t, before, state(t, in), "nothing written")
	assert.Zero(t, streamAnswered(t, in))
}

// TestKeepAliveStreamDeclaredOversize: a message whose prefix declares
// 4 GiB, with nothing after it on a stream left open, ends the stream at
// once with ResourceExhausted naming the limit. connect-go would discard
// the declared bytes before refusing the message, so the stream used to
// wait for the idle limit (here ten minutes) and then end without error.
func TestKeepAliveStreamDeclaredOversize(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t, withConfig(func(c *config.Config) { c.Limits.IdleTimeoutMS = (10 * time.Minute).Milliseconds() }))
	raw := dialRawH2(t, in.Addr, 1<<20)
	id := raw.start(ticketv1connect.LockServiceKeepAliveStreamProcedure, "application/connect+proto", []byte{0, 0xff, 0xff, 0xff, 0xff}, false)
	raw.await("the oversized stream's end", func() bool { return raw.streams[id].ended || raw.streams[id].reset })
	s := raw.streams[id]
	require.Equal(t, "200", s.status)
	assert.Contains(t, string(s.data), `"code":"resource_exhausted"`)
	assert.Contains(t, string(s.data), "1048576")
	eventually(t, func() bool { return metric(t, in, "ticketd_keepalive_streams") == 0 }, "the stream is gone")
}

// TestKeepAliveStreamLimits: streams open on a node are capped by
// limits.max_sessions (ResourceExhausted beyond), a stream that receives
// nothing for limits.idle_timeout_ms is ended without error, and its
// place is free again.
func TestKeepAliveStreamLimits(t *testing.T) {
	t.Parallel()
	const idle = 3 * time.Second
	in, _ := memNode(t, withConfig(func(c *config.Config) {
		c.Limits.MaxSessions = 2
		c.Limits.IdleTimeoutMS = idle.Milliseconds()
	}))
	id := createSession(t, in, 5000)
	var open []*keepAliveStream
	for range 2 {
		st := openKeepAlives(t, in.Lock)
		send(t, st, id)
		require.Equal(t, int64(5000), answer(t, st))
		open = append(open, st)
	}
	third := openKeepAlives(t, in.Lock)
	err := streamEnd(t, third, id)
	requireCode(t, connect.CodeResourceExhausted, err)
	assert.Contains(t, err.Error(), "limits.max_sessions")
	assert.Equal(t, 2.0, metric(t, in, "ticketd_keepalive_streams"))

	for _, st := range open { // nothing sent: the node ends them
		ended := make(chan error, 1)
		go func() {
			_, err := st.Receive()
			ended <- err
		}()
		select {
		case err := <-ended:
			require.ErrorIs(t, err, io.EOF, "an idle stream ends without error")
		case <-time.After(safety):
			t.Fatal("an idle stream is still open")
		}
	}
	eventually(t, func() bool { return metric(t, in, "ticketd_keepalive_streams") == 0 }, "the idle streams are gone")
	st := openKeepAlives(t, in.Lock)
	send(t, st, id)
	require.Equal(t, int64(5000), answer(t, st), "a place is free again")
}

// TestKeepAliveStreamCapPerPrincipal: with authorization on, a principal
// may have as many streams open on a node as it may open sessions
// (limits.max_sessions_per_principal): past it only that principal is
// refused (ResourceExhausted naming it); another one opens its own.
func TestKeepAliveStreamCapPerPrincipal(t *testing.T) {
	t.Parallel()
	_, alice, sa, bob, sb := twoPrincipals(t, 1)

	first := openKeepAlives(t, alice)
	send(t, first, sa)
	require.Equal(t, int64(10_000), answer(t, first))
	err := streamEnd(t, openKeepAlives(t, alice), sa)
	requireCode(t, connect.CodeResourceExhausted, err)
	assert.Contains(t, err.Error(), `principal "alice"`)
	assert.Contains(t, err.Error(), "limits.max_sessions_per_principal")
	bs := openKeepAlives(t, bob)
	send(t, bs, sb)
	require.Equal(t, int64(10_000), answer(t, bs), "bob is not held back by alice's streams")
}

// TestKeepAliveStreamStalledReader: a client that sends a thousand
// keep-alives on one stream and never reads its answers (no flow-control
// window) costs the node a keep-alive or two: the node reads the next
// message only after answering the last, so it does not take the others
// in; the stream is reset once an answer has waited
// limits.stream_write_timeout_ms, and its handler returns.
func TestKeepAliveStreamStalledReader(t *testing.T) {
	t.Parallel()
	const limit = time.Second
	in, _ := memNode(t, withConfig(func(c *config.Config) { c.Limits.StreamWriteTimeoutMS = limit.Milliseconds() }))
	id := createSession(t, in, 60_000)
	before := state(t, in).AppliedIndex

	payload, err := proto.Marshal(&ticketv1.KeepAliveRequest{Session: id})
	require.NoError(t, err)
	var body []byte
	for range 1000 {
		body = binary.BigEndian.AppendUint32(append(body, 0), uint32(len(payload)))
		body = append(body, payload...)
	}
	raw := dialRawH2(t, in.Addr, 0)
	s := raw.awaitReset(raw.open(ticketv1connect.LockServiceKeepAliveStreamProcedure, "application/connect+proto", body), "KeepAliveStream")
	require.Equal(t, "200", s.status)
	require.GreaterOrEqual(t, s.resetAt.Sub(s.opened), limit)
	awaitNoGoroutineIn(t, "server.(*lockService).KeepAliveStream")
	// net/http's HTTP/2 writer takes the first answer off the handler
	// (it waits in the connection for a window); the second one blocks.
	assert.LessOrEqual(t, state(t, in).AppliedIndex, before+2, "two keep-alives written, not a thousand")
	assert.LessOrEqual(t, streamAnswered(t, in), 1.0)
	assert.Equal(t, 0.0, metric(t, in, "ticketd_keepalive_streams"))
}

// TestKeepAliveStreamAcrossFailover: on a real three-node cluster of each
// backend, an SDK session keeps itself alive over a stream to the leader;
// when the leader stops, the SDK opens a stream at the new leader and the
// session stays alive (its Done stays open), with its lock.
func TestKeepAliveStreamAcrossFailover(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) {
			c := nodetest.Start(t, 3, nodetest.WithBackend(backend))
			ctx := ctxT(t)
			var eps []string
			for _, in := range c.Nodes {
				eps = append(eps, in.Addr)
			}
			cl, err := sdk.New(eps, sdk.WithBackoff(5*time.Millisecond, 50*time.Millisecond))
			require.NoError(t, err)
			t.Cleanup(func() { _ = cl.Close() })
			sess, err := cl.CreateSession(ctx, 3*time.Second) // kept alive every second
			require.NoError(t, err)
			_, err = cl.Lock(ctx, "kf/a", 0, sdk.WithSession(sess))
			require.NoError(t, err)

			old := c.WaitLeader(t)
			eventually(t, func() bool { return streamAnswered(t, c.Nodes[old]) >= 1 }, "a keep-alive over a stream to the leader")
			c.Stop(old)
			nl := c.Leader(t)
			eventually(t, func() bool { return streamAnswered(t, nl) >= 2 }, "keep-alives over a stream to the new leader")
			require.NoError(t, sess.Err(), "the session stayed alive")
			got := held(t, nl, "kf/a")
			assert.Equal(t, sess.ID(), got.GetHolders()[0].GetSession())
		})
	}
}

// TestKeepAliveStreamEndsAtClose: the leader of a real three-node cluster
// closing (leadership moves on) ends its keep-alive streams at once with
// Unavailable "stopped" (Node.Close cuts them before the HTTP server waits
// for its handlers), both one waiting for its next message and one in the
// middle of a message, and leaves no handler goroutine behind nor more
// goroutines than ran before the streams opened.
func TestKeepAliveStreamEndsAtClose(t *testing.T) {
	c := nodetest.Start(t, 3)
	li := c.WaitLeader(t)
	l := c.Nodes[li]
	id := createSession(t, l, 60_000)
	before := runtime.NumGoroutine()

	waiting := openKeepAlives(t, l.Lock)
	send(t, waiting, id)
	require.Equal(t, int64(60_000), answer(t, waiting))
	raw := dialRawH2(t, l.Addr, 1<<20)
	raw.start(ticketv1connect.LockServiceKeepAliveStreamProcedure, "application/connect+proto", []byte{0, 0, 0, 0, 100, 1, 2}, false)
	eventually(t, func() bool { return metric(t, l, "ticketd_keepalive_streams") == 2 }, "both streams open")

	c.Stop(li)
	_, err := waiting.Receive()
	requireCode(t, connect.CodeUnavailable, err)
	var ce *connect.Error
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, "stopped", ce.Message(), "ended by the node's close, not by its connection's")
	awaitNoGoroutineIn(t, "server.(*lockService).KeepAliveStream")
	awaitGoroutinesAtMost(t, before)
}
