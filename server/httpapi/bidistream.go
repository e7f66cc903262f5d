package httpapi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// This file bounds the request side of the API's client streams
// (LockService.KeepAliveStream): a stream's request body is a sequence of
// messages that ends only when the client closes it, so the whole-body
// bound of withBodyTimeout (limits.body_read_timeout_ms) does not fit it.
// Instead a stream on which nothing arrives for limits.idle_timeout_ms is
// cut, as an idle connection is closed, and the handler can cut its own
// stream's body (the node closing), which makes a Receive it is blocked in
// return at once. What the stream sends is bounded per message by
// streamwrite.go, and the handler reads its next message only after it
// has answered the last, so a client that stops reading stops the
// server's reading too: HTTP/2 flow control then holds its further
// messages in the client (gRPC-go and etcd's LeaseKeepAlive do the same).

// ErrStreamIdle is the cause of a client stream cut because nothing
// arrived on it for the idle limit (limits.idle_timeout_ms).
var ErrStreamIdle = errors.New("nothing received on the stream within the idle limit")

// ErrStreamMessageTooLarge is the cause of a client stream cut because a
// message on it declared more than maxRequestBytes. connect-go refuses
// such a message only after reading and discarding all the bytes it
// declares (up to 4 GiB), which on a stream that stays open never ends:
// without the cut the stream would wait for the idle limit and then end
// as if idle, without an error.
var ErrStreamMessageTooLarge = fmt.Errorf("a stream message declared more than %d bytes", maxRequestBytes)

// streamBodyKey is the context key of a client stream's *streamBody.
type streamBodyKey struct{}

// clientStreamProcedures returns the paths of the API's procedures whose
// client sends a stream (client and bidirectional streams).
func clientStreamProcedures() map[string]bool {
	paths := map[string]bool{}
	for path, m := range apiMethods() {
		if m.IsStreamingClient() {
			paths[path] = true
		}
	}
	return paths
}

// serveClientStream serves r, a client stream over HTTP/2, with its body
// cut once nothing arrived on it for idle (0: never) or when CutStream is
// called with the request's context.
func serveClientStream(idle time.Duration, h http.Handler, w http.ResponseWriter, r *http.Request) {
	b := &streamBody{ReadCloser: r.Body, idle: idle, start: time.Now()}
	if idle > 0 {
		b.timer = time.AfterFunc(idle, b.checkIdle)
		defer b.timer.Stop()
	}
	r.Body = b
	h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), streamBodyKey{}, b)))
}

// CutStream cuts the request body of the client stream that ctx's request
// opened, with cause: a Receive blocked on it returns, and StreamCut
// reports cause. It returns false for a context of no such stream (HTTP/1,
// a handler called directly). The first cause is kept.
func CutStream(ctx context.Context, cause error) bool {
	b, ok := ctx.Value(streamBodyKey{}).(*streamBody)
	if ok {
		b.cut(cause)
	}
	return ok
}

// StreamCut returns why the body of ctx's client stream was cut
// (ErrStreamIdle, or CutStream's cause), nil while it is not.
func StreamCut(ctx context.Context) error {
	if b, ok := ctx.Value(streamBodyKey{}).(*streamBody); ok {
		return b.cause()
	}
	return nil
}

// streamBody is a client stream's request body, cut by its idle timer or
// by CutStream. Reads and cuts may run concurrently (the HTTP/2 body is
// safe for that).
//
// A read that returns data costs a clock reading and an atomic store: the
// timer is not reset per message (see streamwrite.go for the same choice);
// when it goes off early, it sets itself for the rest of the idle limit.
type streamBody struct {
	io.ReadCloser
	idle  time.Duration
	start time.Time    // monotonic origin of last
	last  atomic.Int64 // time.Since(start) at the last read that returned data, in ns
	timer *time.Timer  // nil when idle is 0

	env envelopeScan // the stream's message prefixes, read by Read only

	mu  sync.Mutex
	err error // why the body was cut; nil while it is not
}

// Read reads the next bytes of the stream; once the body is cut its error
// names the cause. A message prefix declaring more than maxRequestBytes
// cuts the body (ErrStreamMessageTooLarge), so the next Read fails at once.
func (b *streamBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.last.Store(int64(time.Since(b.start)))
		if b.env.scan(p[:n]) > maxRequestBytes {
			b.cut(ErrStreamMessageTooLarge)
		}
	}
	if err != nil && err != io.EOF {
		if cause := b.cause(); cause != nil {
			err = fmt.Errorf("stream cut: %w", cause)
		}
	}
	return n, err
}

// checkIdle runs on the timer: it cuts the body when nothing has arrived
// for idle, else sets the timer for the rest of it.
func (b *streamBody) checkIdle() {
	quiet := time.Since(b.start) - time.Duration(b.last.Load())
	if quiet >= b.idle {
		b.cut(ErrStreamIdle)
		return
	}
	b.timer.Reset(b.idle - quiet)
}

// cut records cause (the first one) and closes the body, so that a
// pending or later Read fails.
func (b *streamBody) cut(cause error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = cause
	}
	b.mu.Unlock()
	_ = b.ReadCloser.Close()
}

// cause is why the body was cut, nil while it is not.
func (b *streamBody) cause() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// envelopeScan follows the messages of a client stream's body as they are
// read: each is a 5-byte prefix (a flags byte, then the payload's length,
// 4 bytes big-endian) and its payload, the same envelope in the Connect
// streaming protocol, gRPC (its Length-Prefixed-Message) and gRPC-Web.
type envelopeScan struct {
	prefix [5]byte
	have   int    // bytes of prefix read so far
	left   uint32 // payload bytes of the current message not read yet
}

// scan passes p, the next bytes of the body, and returns the largest
// length a prefix completed in p declares (0 when none did).
func (e *envelopeScan) scan(p []byte) uint32 {
	var largest uint32
	for len(p) > 0 {
		if e.left > 0 {
			skip := min(uint32(len(p)), e.left)
			e.left -= skip
			p = p[skip:]
			continue
		}
		c := copy(e.prefix[e.have:], p)
		e.have += c
		p = p[c:]
		if e.have == len(e.prefix) {
			e.have = 0
			e.left = binary.BigEndian.Uint32(e.prefix[1:])
			largest = max(largest, e.left)
		}
	}
	return largest
}
