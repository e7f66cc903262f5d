package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// withBodyTimeout bounds how long reading a request's body may take, over
// HTTP/1.x and HTTP/2 alike: a body trickled slowly (one byte a second) or
// announced and never sent is cut once d has passed and the read fails. The
// bound is lifted once the body reaches EOF, so a request that then waits
// (Acquire with wait, Watch) is not cut. d <= 0 disables it.
//
// HTTP/1.x uses the connection's read deadline (http.ResponseController);
// the connection is closed when it fires. HTTP/2 uses a timer that closes
// the stream's body (unblocking a pending Read); the server then resets the
// stream when the handler returns. The stream's own read deadline
// (ResponseController on HTTP/2) is not used: setting it is a round trip
// through the connection's serve loop before every handler starts, which
// delayed the start of the request's own deadline enough to change how a
// client's cancellation races it (e2e TestGhostRelease).
//
// The body of a client stream over HTTP/2 (a path in streams:
// KeepAliveStream), whose messages go on for as long as the stream is
// open, is not bounded whole: it is cut once nothing arrives for idle
// instead (limits.idle_timeout_ms, bidistream.go; idle <= 0: never).
func withBodyTimeout(d, idle time.Duration, streams map[string]bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		if r.ProtoMajor >= 2 && streams[r.URL.Path] {
			serveClientStream(idle, h, w, r)
			return
		}
		if d <= 0 {
			h.ServeHTTP(w, r)
			return
		}
		if r.ProtoMajor == 1 {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(d)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
			h.ServeHTTP(w, r)
			return
		}
		b := startTimedBody(r.Body, d)
		defer b.finish()
		r.Body = b
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts an HTTP/1.x connection's read deadline when the body
// reaches EOF.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// timedBody is an HTTP/2 request body closed by its timer unless read to
// EOF first. Read and expire may run concurrently (the HTTP/2 body is safe
// for that).
//
// A timedBody and its timer are reused from timedBodies once their request
// is done, when the timer was stopped before it fired (so expire cannot
// run late on the next request's body): every HTTP/2 call of the API
// passes here, and a new body, timer and expire func were three
// allocations per call (docs/benchmarks.md, "The API call path at 64
// clients").
type timedBody struct {
	io.ReadCloser
	timer   *time.Timer
	expired atomic.Bool
	stopped atomic.Bool // the timer was stopped before it fired
}

// timedBodies holds idle timedBodies, their timers stopped.
var timedBodies sync.Pool

// startTimedBody returns body bounded to d: a timedBody from timedBodies,
// or a new one, its timer started.
func startTimedBody(body io.ReadCloser, d time.Duration) *timedBody {
	b, _ := timedBodies.Get().(*timedBody)
	if b == nil {
		b = &timedBody{ReadCloser: body}
		b.timer = time.AfterFunc(d, b.expire)
		return b
	}
	b.ReadCloser = body
	b.timer.Reset(d)
	return b
}

// finish ends b's bound once its request is done, and keeps b for another
// request unless its timer fired.
func (b *timedBody) finish() {
	if !b.timer.Stop() && !b.stopped.Load() {
		return // fired: expire has run or is running; let it keep b
	}
	b.ReadCloser = nil
	b.stopped.Store(false)
	timedBodies.Put(b)
}

// expire cuts the body: a pending or later Read fails.
func (b *timedBody) expire() {
	b.expired.Store(true)
	_ = b.ReadCloser.Close()
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		if b.timer.Stop() {
			b.stopped.Store(true)
		}
	case err != nil && b.expired.Load():
		err = fmt.Errorf("request body not read in time: %w", os.ErrDeadlineExceeded)
	}
	return n, err
}
