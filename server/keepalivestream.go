package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/httpapi"
	"github.com/ticketd/ticketd/server/security"
)

// This file is LockService.KeepAliveStream: KeepAlive over one
// bidirectional stream (etcd's LeaseKeepAlive, docs/design.md#api). A
// client that keeps a session alive opens one stream and sends one
// message per keep-alive, instead of one HTTP/2 stream, its headers and a
// handler per call: the request path's per-call cost is most of a unary
// keep-alive's CPU (docs/benchmarks.md, "Request path"). What a keep-alive
// does is unchanged: every message is served as a unary KeepAlive on the
// promoted leader (keepAlive: the session's principal checked, the
// refusals given after a ReadIndex, one KeepAliveSession shared with the
// other renewals of the commit round), so leases stay exact across
// failover (docs/design.md#leases).
//
// Messages are served one at a time, in order: the handler reads the next
// one after it has answered the last. So a stream holds at most one
// keep-alive in flight, and a client that stops reading stops the
// server's reading too (HTTP/2 flow control keeps its further messages in
// the client; the unread answer is bounded by
// limits.stream_write_timeout_ms, httpapi/streamwrite.go). A stream whose
// client sends nothing for limits.idle_timeout_ms is ended without error
// (httpapi/bidistream.go); messages are bounded like every request's
// (1 MiB, httpapi.maxRequestBytes).
//
// The first refusal ends the stream with the code the unary call would
// return (toConnect): InvalidArgument (session 0), NotFound (an unknown or
// ended session, or another principal's), Unavailable with a LeaderHint
// on a node that is not the leader (a stream is not forwarded: the client
// opens it at the leader) or one shutting down. A client keeps one stream
// per session, so a refusal ends only the keep-alives of the session it is
// about.

// keepAliveStreams counts the KeepAliveStream streams open on this node,
// in total and per principal, and cuts them all when the node closes. The
// zero value is ready; it is safe for concurrent use.
type keepAliveStreams struct {
	mu     sync.Mutex
	total  int
	by     map[string]int    // principal → streams open; no zero entries ("" not counted)
	cuts   map[uint64]func() // open stream → what ends it (its body cut with core.ErrStopped)
	nextID uint64
	closed bool // the node is closing: no new stream

	answered atomic.Uint64 // keep-alives answered on streams
}

// KeepAliveStream serves keep-alives of sessions over one stream, one
// answer per message, in order (see above and docs/api.md#keepalivestream).
func (s *lockService) KeepAliveStream(ctx context.Context, stream *connect.BidiStream[ticketv1.KeepAliveRequest, ticketv1.KeepAliveResponse]) error {
	return s.n.toConnect(s.n.serveKeepAliveStream(ctx, stream.Conn()))
}

// serveKeepAliveStream serves the stream of conn until the client closes
// its side or goes (nil), the stream is idle too long (nil), or a message
// is refused (its error, as the unary KeepAlive's).
func (n *Node) serveKeepAliveStream(ctx context.Context, conn connect.StreamingHandlerConn) error {
	done, err := n.openKeepAliveStream(ctx)
	if err != nil {
		return err
	}
	defer done()
	if err := n.atLeader(ctx); err != nil {
		return err
	}
	var (
		req ticketv1.KeepAliveRequest // reused: Receive resets it
		res ticketv1.KeepAliveResponse
	)
	for {
		if err := conn.Receive(&req); err != nil {
			return keepAliveStreamEnd(ctx, err)
		}
		ttlMS, err := n.streamKeepAlive(ctx, req.GetSession())
		if err != nil {
			return err
		}
		res.TtlMs = ttlMS
		// Counted before the write: the renewal is committed, and a client
		// that has read the answer must find it in the metric already.
		n.kaStreams.answered.Add(1)
		if err := conn.Send(&res); err != nil {
			return err
		}
	}
}

// streamKeepAlive serves one message of a stream as onLeader serves a
// unary KeepAlive, but never forwards: on a node that is not the promoted
// leader it fails with a *core.NotLeaderError naming the leader (route's
// hot path is one atomic load on the leader).
func (n *Node) streamKeepAlive(ctx context.Context, id uint64) (int64, error) {
	if err := core.ValidateSession(id); err != nil {
		return 0, err
	}
	if err := n.atLeader(ctx); err != nil {
		return 0, err
	}
	return n.keepAlive(ctx, id)
}

// atLeader returns nil when this node is the promoted leader (waiting, as
// route does, for an election in progress), else a *core.NotLeaderError
// naming the leader, core.ErrStopped or ctx's error.
func (n *Node) atLeader(ctx context.Context) error {
	leader, here, err := n.route(ctx)
	if err != nil {
		return err
	}
	if !here {
		return &core.NotLeaderError{Leader: leader}
	}
	return nil
}

// keepAliveStreamEnd is the end of a stream whose Receive failed with
// err: nil when the client closed its side (every message was answered)
// or the stream was idle too long; core.ErrStopped when the node closing
// cut it; else err (the client went, or sent a message over the size
// limit: ResourceExhausted, also when its prefix alone arrived and cut
// the stream, httpapi.ErrStreamMessageTooLarge).
func keepAliveStreamEnd(ctx context.Context, err error) error {
	switch cause := httpapi.StreamCut(ctx); {
	case errors.Is(cause, httpapi.ErrStreamIdle):
		return nil
	case errors.Is(cause, httpapi.ErrStreamMessageTooLarge):
		return err
	case cause != nil:
		return cause
	case errors.Is(err, io.EOF):
		return nil
	}
	return err
}

// openKeepAliveStream admits a new stream of ctx's principal and counts
// it until the returned done is called (once, when the stream ends). A
// stream is refused, with ErrTooManyStreams, when limits.max_sessions
// streams are open on this node, or, with authorization on, when the
// principal has as many open here as it may open sessions
// (limits.max_sessions_per_principal, or its sessions quota when lower;
// docs/security.md#quotas): a client needs one stream per session it
// keeps alive, so the caps refuse only a client that opens more, and no
// principal can take every stream. core.ErrStopped once the node closes.
func (n *Node) openKeepAliveStream(ctx context.Context) (done func(), err error) {
	principal := n.grantPrincipal(ctx)
	total, per, perKey := n.cfg.Limits.MaxSessions, 0, ""
	if principal != "" {
		per, perKey = n.cfg.Limits.MaxSessionsPerPrincipal, "limits.max_sessions_per_principal"
		if q, key := n.quotaOf(principal, security.QuotaSessions); q > 0 && (per == 0 || q < per) {
			per, perKey = q, "the policy's sessions quota ("+key+")"
		}
	}
	s := &n.kaStreams
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, core.ErrStopped
	case total > 0 && s.total >= total:
		return nil, fmt.Errorf("%w: %d open on this node (limits.max_sessions)", ErrTooManyStreams, total)
	case per > 0 && s.by[principal] >= per:
		return nil, fmt.Errorf("%w: principal %q has %d open on this node (%s)", ErrTooManyStreams, principal, per, perKey)
	}
	if s.cuts == nil {
		s.cuts, s.by = map[uint64]func(){}, map[string]int{}
	}
	s.nextID++
	id := s.nextID
	s.cuts[id] = func() { httpapi.CutStream(ctx, core.ErrStopped) }
	s.total++
	if principal != "" {
		s.by[principal]++
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.cuts, id)
		s.total--
		if principal != "" {
			if s.by[principal]--; s.by[principal] <= 0 {
				delete(s.by, principal)
			}
		}
	}, nil
}

// closeAll refuses new streams and ends the open ones: a handler waiting
// for its client's next message returns at once with core.ErrStopped
// (Unavailable), one serving a message answers it first. Node.Close calls
// it before the HTTP server waits for its handlers.
func (s *keepAliveStreams) closeAll() {
	s.mu.Lock()
	s.closed = true
	cuts := make([]func(), 0, len(s.cuts))
	for _, cut := range s.cuts {
		cuts = append(cuts, cut)
	}
	s.mu.Unlock()
	for _, cut := range cuts {
		cut()
	}
}

// open returns how many streams are open on this node.
func (s *keepAliveStreams) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}
