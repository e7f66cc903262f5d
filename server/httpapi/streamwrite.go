package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"
)

// This file bounds how long each message of a stream may take to be
// written (limits.stream_write_timeout_ms), so that a client that stops
// reading a stream, or never reads it, cannot hold the handler that
// serves it (docs/security.md#stalled-readers).
//
// Over HTTP/2 a stream's data is sent only as far as the client's
// flow-control window allows: a client that never reads (or never opens
// its window) leaves the handler blocked in its Send for as long as the
// connection lives, with what it holds (a snapshot being streamed, a
// watcher and its buffer, a goroutine, a stream slot). gRPC-go's
// ServerStream.SendMsg and etcd's Watch and Maintenance.Snapshot block the
// same way, until the stream's context ends; keepalive only detects dead
// connections, and a stalled client's transport still answers pings. A
// limit on the whole response (writelimit.go) would cut a watch that is
// meant to stay open, and an idle timeout renewed at every byte would let a
// reader taking a byte now and then keep it for ever. So the bound is per
// message: a message must be written within the limit from its first
// byte, and between messages (a watch waiting for a change) nothing runs.

// cutDeadline is the write deadline that resets a stream at once: any time
// in the past (HTTP/2 resets the stream when its deadline is already past;
// HTTP/1.x fails the pending write).
var cutDeadline = time.Unix(1, 0)

// streamWriterKey is the context key of a stream's *streamWriter.
type streamWriterKey struct{}

// streamProcedures returns the HTTP paths of the procedures that send a
// stream (server streams and bidirectional streams) of the services
// served, each under the name it is served as (the key of services) and
// read from the registered descriptor of the service its value names (the
// same name, but for services served from a copy of their schema
// registered under another package). A service not registered adds
// nothing.
func streamProcedures(services map[string]string) map[string]bool {
	paths := map[string]bool{}
	for served, described := range services {
		sd := serviceDescriptor(described)
		if sd == nil {
			continue
		}
		for i := 0; i < sd.Methods().Len(); i++ {
			if m := sd.Methods().Get(i); m.IsStreamingServer() {
				paths["/"+served+"/"+string(m.Name())] = true
			}
		}
	}
	return paths
}

// withStreamWriteLimit serves the requests for the procedures in streams
// with a ResponseWriter that resets the stream when a message is not
// written within d of its first byte (see streamWriter); log gets a debug
// line for each stream reset. Other requests go to h unchanged. d <= 0
// disables it.
func withStreamWriteLimit(d time.Duration, streams map[string]bool, log *zap.Logger, h http.Handler) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !streams[r.URL.Path] {
			h.ServeHTTP(w, r)
			return
		}
		sw := newStreamWriter(w, r, d, log)
		defer sw.finish()
		h.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), streamWriterKey{}, sw)))
	})
}

// StreamEnding bounds, whole, what the stream answering ctx's request still
// writes: from now on everything it writes (the message being written, any
// later ones, and the stream's end) must be written within the limit
// (limits.stream_write_timeout_ms) or the stream is reset. A handler calls
// it when it is about to end a stream with messages still to send (a watch
// the hub ended, with its buffered events), so that a client reading just
// fast enough to meet the per-message bound cannot stretch the ending over
// one limit per message. No effect on a context of no such stream (the
// limit is off, a test's handler called directly).
func StreamEnding(ctx context.Context) {
	if sw, ok := ctx.Value(streamWriterKey{}).(*streamWriter); ok {
		sw.ending()
	}
}

// streamWriter is the ResponseWriter of one stream: a message, from the
// first Write after the last Flush to the end of the Flush that sends it
// (connect-go flushes after every message it sends, and after the stream's
// end), must be written within limit; past it, a timer resets the stream
// by giving it a write deadline in the past (http.ResponseController):
// HTTP/2 sends RST_STREAM and the connection's other streams go on, over
// HTTP/1.x the pending write fails and the connection is closed. Either
// way the pending write returns an error, the request's context ends, and
// every later Write and Flush fails at once.
//
// A message that goes out in time costs a lock and a clock reading: no
// round trip through the HTTP/2 connection's serve loop, as setting and
// lifting a write deadline for every message would, and no timer update
// either (resetting the timer for every message cost about 4 µs a
// message, against 0.1 µs, in BenchmarkStreamMessage on a busy machine):
// the stream's one timer is set only when it is not set already, and when
// it goes off before what is due by then it sets itself for that, so it
// runs about once per limit at most.
//
// The ResponseWriter is touched from the timer only while the handler
// runs: finish marks the handler done and waits for a reset in progress.
type streamWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController // of the wrapped ResponseWriter
	limit time.Duration
	log   *zap.Logger
	req   *http.Request

	mu      sync.Mutex
	timer   *time.Timer   // made at the first message; fire runs on it
	armed   bool          // timer is set, to go off at or before dueLocked
	msgDue  time.Time     // the message being written must be out by then; zero: none pending
	restDue time.Time     // set by ending: everything still written must be out by then
	cutting chan struct{} // set when fire resets the stream, closed once it has
	done    bool          // the handler returned: the ResponseWriter is no longer ours
}

// newStreamWriter wraps w, the ResponseWriter of r, with limit d per
// message; call finish once the handler has returned.
func newStreamWriter(w http.ResponseWriter, r *http.Request, d time.Duration, log *zap.Logger) *streamWriter {
	return &streamWriter{ResponseWriter: w, rc: http.NewResponseController(w), limit: d, log: log, req: r}
}

// Write writes p as part of the current message (starting one if none is
// pending).
func (s *streamWriter) Write(p []byte) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	n, err := s.ResponseWriter.Write(p)
	return n, s.failed(err)
}

// Flush sends what the message has buffered; its error is FlushError's.
func (s *streamWriter) Flush() { _ = s.FlushError() }

// FlushError sends what the message has buffered and ends the message: the
// limit stops counting once the client has taken it. Its error is the
// wrapped writer's flush error, or the limit's once the stream is reset.
func (s *streamWriter) FlushError() error {
	if err := s.begin(); err != nil {
		return err
	}
	err := s.rc.Flush()
	s.end()
	return s.failed(err)
}

// Unwrap is the wrapped ResponseWriter, for http.ResponseController (read
// deadlines, a whole-response write deadline set inside, as PeerService's).
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// begin starts a message unless one is pending: its bound is limit from
// now. It fails once the stream has been reset.
func (s *streamWriter) begin() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cutting != nil {
		return s.errCut()
	}
	if s.msgDue.IsZero() {
		s.msgDue = time.Now().Add(s.limit)
		s.armLocked()
	}
	return nil
}

// end ends the pending message. The timer is left as it is: it finds
// nothing due (or the next message's bound, or the rest's) when it goes
// off.
func (s *streamWriter) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgDue = time.Time{}
}

// ending bounds the rest of the stream, whole, to limit from now (the
// pending message keeps its own bound if that is sooner).
func (s *streamWriter) ending() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.restDue.IsZero() && !s.done {
		s.restDue = time.Now().Add(s.limit)
		s.armLocked()
	}
}

// dueLocked is when what is being written must be out: the sooner of the
// pending message's bound and the rest's; zero when neither runs.
func (s *streamWriter) dueLocked() time.Time {
	switch {
	case s.msgDue.IsZero():
		return s.restDue
	case s.restDue.IsZero() || s.msgDue.Before(s.restDue):
		return s.msgDue
	}
	return s.restDue
}

// armLocked makes sure the timer goes off by dueLocked: a timer already
// set goes off sooner (every bound is set later than those before it, so
// it ends later), and fire then sets it for what is due.
func (s *streamWriter) armLocked() {
	due := s.dueLocked()
	if s.armed || s.done || due.IsZero() {
		return
	}
	s.armed = true
	if s.timer == nil {
		s.timer = time.AfterFunc(time.Until(due), s.fire)
	} else {
		s.timer.Reset(time.Until(due))
	}
}

// fire resets the stream if what is due is still not written, and sets the
// timer again if something is due later.
func (s *streamWriter) fire() {
	s.mu.Lock()
	s.armed = false
	due := s.dueLocked()
	if s.done || s.cutting != nil || due.IsZero() {
		s.mu.Unlock()
		return
	}
	if time.Now().Before(due) {
		s.armLocked()
		s.mu.Unlock()
		return
	}
	cut := make(chan struct{})
	s.cutting = cut
	s.mu.Unlock()
	defer close(cut)
	// Both net/http writers take a write deadline from any goroutine (the
	// HTTP/2 one hands the reset to the connection's serve loop, the
	// HTTP/1.x one sets the connection's); finish waits for this call.
	if err := s.rc.SetWriteDeadline(cutDeadline); err != nil {
		s.log.Warn("stream not reset: its writer takes no write deadline", zap.String("procedure", s.req.URL.Path), zap.Error(err))
		return
	}
	s.log.Debug("stream reset: a message was not written within the stream write limit",
		zap.String("procedure", s.req.URL.Path), zap.String("remote", s.req.RemoteAddr), zap.Duration("limit", s.limit))
}

// finish runs when the handler returns: the timer stops and no reset
// touches the ResponseWriter after this (one in progress is waited for).
func (s *streamWriter) finish() {
	s.mu.Lock()
	s.done = true
	if s.timer != nil {
		s.timer.Stop()
	}
	cut := s.cutting
	s.mu.Unlock()
	if cut != nil {
		<-cut
	}
}

// failed is err, or the limit's error when the stream has been reset (the
// wrapped writer's own error then only says the stream is closed).
func (s *streamWriter) failed(err error) error {
	if err == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cutting != nil {
		return s.errCut()
	}
	return err
}

// errCut is the error of every write once the stream has been reset:
// DeadlineExceeded, as connect-go keeps a *connect.Error its writer
// returns, so the handler's result says why its stream ended.
func (s *streamWriter) errCut() error {
	return connect.NewError(connect.CodeDeadlineExceeded,
		fmt.Errorf("stream reset: a message was not written within %v (limits.stream_write_timeout_ms): %w", s.limit, os.ErrDeadlineExceeded))
}
