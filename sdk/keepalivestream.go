package sdk

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"connectrpc.com/connect"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// This file sends a session's keep-alives over one LockService
// KeepAliveStream per session (etcd clientv3 keeps one LeaseKeepAlive
// stream for its leases): a keep-alive is then one message and its answer
// on a stream already open, not an HTTP/2 stream, headers and a handler
// per call (docs/benchmarks.md, "Session keep-alives over a stream"). The
// stream is opened lazily, at the node invoke chose (the leader), by the
// first keep-alive of the session there, and replaced whenever it fails:
// the retries, backoff and leader following stay invoke's, as for every
// call. A node that answers the stream with Unimplemented (an older
// ticketd) or refuses it (ResourceExhausted: its cap of streams) is sent
// unary KeepAlives for streamRetryAfter before a stream is tried there
// again.
//
// The stream is per session because the server ends a stream at the
// first refusal (docs/api.md#keepalivestream): a session that ended then
// takes no other session's keep-alives with it.

// streamRetryAfter is how long keep-alives to a node that does not serve
// KeepAliveStream go unary before the stream is tried there again (a node
// upgraded in a rolling upgrade gets streams back within it).
const streamRetryAfter = time.Minute

// keepAliveStreams is a client's keep-alive streams, one per session, and
// the nodes that get unary keep-alives for now. The zero value is ready;
// it is safe for concurrent use.
type keepAliveStreams struct {
	mu      sync.Mutex
	streams map[uint64]*keepAliveStream // by session id
	unary   map[string]time.Time        // node base URL → unary keep-alives there until then
}

// keepAliveStream is one open KeepAliveStream at one node. One keep-alive
// at a time uses it (slot): its answer is the next message the stream
// receives, so a keep-alive whose attempt ended before its answer came
// ends the stream too (cut), and a late answer is never taken for a
// later keep-alive's, whose send time anchors the lease (keeper.extend).
type keepAliveStream struct {
	node     *node
	slot     chan struct{} // holds one token while a keep-alive uses the stream
	stream   *connect.BidiStreamForClientSimple[ticketv1.KeepAliveRequest, ticketv1.KeepAliveResponse]
	cancel   context.CancelFunc
	answered bool // a keep-alive was answered on it (under slot)
	dead     bool // dropped: no keep-alive may use it any more (under keepAliveStreams.mu)
}

// keepAliveAt sends one keep-alive of req's session to n: over the
// session's stream at n, or unary where streams are not served. It is one
// attempt of invoke (ctx bounds it); its errors are the stream's or the
// call's, classified as every attempt's are. A stream that the server had
// ended without error before this keep-alive was sent (it was idle for
// limits.idle_timeout_ms) is replaced at once, within the attempt.
func (c *Client) keepAliveAt(ctx context.Context, n *node, req *ticketv1.KeepAliveRequest) (*ticketv1.KeepAliveResponse, error) {
	for fresh := false; !fresh; {
		if c.kaStreams.unaryAt(n.url) {
			return n.lock.KeepAlive(ctx, req)
		}
		s, err := c.kaStreams.acquire(ctx, c, n, req.GetSession())
		if err != nil {
			return nil, err
		}
		fresh = !s.answered
		res, err := s.exchange(ctx, req)
		if err == nil {
			s.answered = true
			c.kaStreams.release(s)
			return res, nil
		}
		c.kaStreams.drop(req.GetSession(), s)
		c.kaStreams.release(s)
		switch connect.CodeOf(err) {
		case connect.CodeUnimplemented, connect.CodeResourceExhausted:
			c.kaStreams.goUnary(n.url)
			return n.lock.KeepAlive(ctx, req)
		}
		if !errors.Is(err, io.EOF) || ctx.Err() != nil {
			return nil, err
		}
	}
	return nil, connect.NewError(connect.CodeUnavailable, errors.New("keep-alive stream ended without an answer"))
}

// exchange sends req on s and receives its answer, within ctx: if ctx
// ends first the stream is cut, and the error is ctx's. A stream the
// server ended without error fails with an error wrapping io.EOF.
func (s *keepAliveStream) exchange(ctx context.Context, req *ticketv1.KeepAliveRequest) (*ticketv1.KeepAliveResponse, error) {
	stop := context.AfterFunc(ctx, s.cancel)
	defer stop()
	err := s.stream.Send(req)
	var res *ticketv1.KeepAliveResponse
	if err == nil || errors.Is(err, io.EOF) {
		// Send fails with io.EOF once the server has ended the stream:
		// Receive then returns why.
		res, err = s.stream.Receive()
	}
	if err != nil && ctx.Err() != nil {
		code := connect.CodeCanceled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			code = connect.CodeDeadlineExceeded
		}
		return nil, connect.NewError(code, ctx.Err())
	}
	return res, err
}

// unaryAt reports whether keep-alives to the node at url go unary now.
func (k *keepAliveStreams) unaryAt(url string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	until, ok := k.unary[url]
	if ok && time.Now().After(until) {
		delete(k.unary, url)
		return false
	}
	return ok
}

// goUnary sends keep-alives to the node at url unary for streamRetryAfter.
func (k *keepAliveStreams) goUnary(url string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.unary == nil {
		k.unary = map[string]time.Time{}
	}
	k.unary[url] = time.Now().Add(streamRetryAfter)
}

// acquire returns session id's stream at n, holding its slot: the open
// one, or a new one (ending one open at another node). It waits for a
// keep-alive of the same session using the stream, up to ctx.
func (k *keepAliveStreams) acquire(ctx context.Context, c *Client, n *node, id uint64) (*keepAliveStream, error) {
	for {
		s, err := k.streamAt(c, n, id)
		if err != nil {
			return nil, err
		}
		select {
		case s.slot <- struct{}{}:
		case <-ctx.Done():
			return nil, connect.NewError(connect.CodeDeadlineExceeded, ctx.Err())
		}
		k.mu.Lock()
		dead := s.dead
		k.mu.Unlock()
		if !dead {
			return s, nil
		}
		k.release(s) // dropped while this keep-alive waited: take the next one
	}
}

// streamAt returns session id's stream at n, opening one (tied to the
// client's life, so Close ends it) when there is none there.
func (k *keepAliveStreams) streamAt(c *Client, n *node, id uint64) (*keepAliveStream, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s := k.streams[id]; s != nil {
		if s.node == n {
			return s, nil
		}
		k.dropLocked(id, s)
	}
	ctx, cancel := context.WithCancel(c.ctx)
	st, err := n.lock.KeepAliveStream(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	closeOnCancel(ctx, st)
	s := &keepAliveStream{node: n, slot: make(chan struct{}, 1), stream: st, cancel: cancel}
	if k.streams == nil {
		k.streams = map[uint64]*keepAliveStream{}
	}
	k.streams[id] = s
	return s, nil
}

// release gives s's slot back.
func (k *keepAliveStreams) release(s *keepAliveStream) { <-s.slot }

// drop ends s, session id's stream, and forgets it, unless another has
// replaced it already.
func (k *keepAliveStreams) drop(id uint64, s *keepAliveStream) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.streams[id] == s {
		k.dropLocked(id, s)
		return
	}
	s.dead = true
	s.end()
}

// dropLocked forgets s, session id's stream, and ends it.
func (k *keepAliveStreams) dropLocked(id uint64, s *keepAliveStream) {
	delete(k.streams, id)
	s.dead = true
	s.end()
}

// closeSession ends session id's stream, if any: the session is closed.
func (k *keepAliveStreams) closeSession(id uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s := k.streams[id]; s != nil {
		k.dropLocked(id, s)
	}
}

// end cuts the stream (see closeOnCancel). Safe to call more than once
// and beside a keep-alive using it, whose Send or Receive then fails.
func (s *keepAliveStream) end() { s.cancel() }

// closeOnCancel closes st once ctx, its context, ends (end, an attempt
// that ended before its answer, Client.Close): closing the response body
// resets the HTTP/2 stream (RST_STREAM), which frees it on both sides and
// makes the server's handler return; cancelling the context alone does
// not while the request body is open. The pipe and the HTTP/2 body take a
// Close beside a Read or Write of a keep-alive using the stream.
func closeOnCancel(ctx context.Context, st *connect.BidiStreamForClientSimple[ticketv1.KeepAliveRequest, ticketv1.KeepAliveResponse]) {
	context.AfterFunc(ctx, func() {
		_ = st.CloseRequest()
		_ = st.CloseResponse()
	})
}
