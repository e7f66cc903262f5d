package server

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// stateNewGrace is how long a just-accepted connection may stay in
// http.StateNew (TLS handshake, first request not yet read) before, with
// the cap reached, it may be closed to make room for a newer one. It keeps a
// legitimate handshake from being shed in favour of an attacker's, and an
// attacker's silent connections from holding slots against newcomers.
const stateNewGrace = time.Second

// defaultNewTimeout bounds http.StateNew when no header timeout is configured.
const defaultNewTimeout = 10 * time.Second

// connLimiter caps the client API's open connections. A connection is
// accepted first; when that puts the node over the cap, room is made only
// by closing the oldest connection idle in the http.Server ConnState sense
// (StateIdle: keep-alive, no request in flight), else the oldest one stuck
// in StateNew for longer than stateNewGrace; when there is none, the new
// connection itself is refused (closed). Busy connections are never cut
// here; their slow request bodies are bounded by withBodyTimeout. A
// connection may stay in StateNew at most newTimeout (the header timeout).
// Its connState must be the http.Server's ConnState hook. Safe for
// concurrent use.
type connLimiter struct {
	max        int           // 0: no cap
	newTimeout time.Duration // longest stay in StateNew

	mu    sync.Mutex
	conns map[*limitedConn]*connEntry // open connections
}

// connEntry is an open connection's ConnState and since when. state and
// since are atomics, so that connState, called on every HTTP/2 request
// (the connection turns active when its first stream opens and idle when
// its last one closes), takes no lock shared by all connections: under
// many clients that lock was the node's most contended one. A reader
// holding c.mu may see a new state with the previous since for a moment:
// it then picks a slightly different victim, nothing more.
type connEntry struct {
	state atomic.Int32 // an http.ConnState
	since atomic.Int64 // Unix nanoseconds
	timer *time.Timer  // closes the connection if still StateNew
}

// set records that the connection entered s now, unless it is in s already.
func (e *connEntry) set(s http.ConnState) {
	if http.ConnState(e.state.Load()) != s {
		e.since.Store(time.Now().UnixNano())
		e.state.Store(int32(s))
	}
}

// get returns the connection's state and since when.
func (e *connEntry) get() (http.ConnState, time.Time) {
	return http.ConnState(e.state.Load()), time.Unix(0, e.since.Load())
}

func newConnLimiter(max int, newTimeout time.Duration) *connLimiter {
	if newTimeout <= 0 {
		newTimeout = defaultNewTimeout
	}
	return &connLimiter{max: max, newTimeout: newTimeout, conns: map[*limitedConn]*connEntry{}}
}

// listener wraps l with the cap.
func (c *connLimiter) listener(l net.Listener) net.Listener {
	if c.max <= 0 {
		return l
	}
	return &limitListener{Listener: l, c: c}
}

// connState records each connection's state (the http.Server ConnState hook).
func (c *connLimiter) connState(conn net.Conn, s http.ConnState) {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	lc, ok := conn.(*limitedConn)
	if !ok {
		return
	}
	lc.entry.set(s) // set by admit before the server saw the connection
}

// admit takes a slot for lc, closing the oldest idle (or overdue StateNew)
// connection when the cap is reached. It returns false, taking no slot,
// when nothing may be closed: the caller then refuses lc.
func (c *connLimiter) admit(lc *limitedConn) bool {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.conns) >= c.max {
		victim := c.oldest(now)
		if victim == nil {
			return false
		}
		c.dropLocked(victim)
		go victim.Conn.Close() // a TLS close may write an alert: never block Accept
	}
	e := &connEntry{}
	e.state.Store(int32(http.StateNew))
	e.since.Store(now.UnixNano())
	e.timer = time.AfterFunc(c.newTimeout, func() {
		c.mu.Lock()
		state, _ := e.get()
		stuck := c.conns[lc] == e && state == http.StateNew
		c.mu.Unlock()
		if stuck {
			_ = lc.Close()
		}
	})
	c.conns[lc] = e
	lc.entry = e
	return true
}

// oldest is the connection to close for room: the one idle longest, else
// the one in StateNew longest if beyond stateNewGrace; nil if none. c.mu held.
func (c *connLimiter) oldest(now time.Time) *limitedConn {
	var idle, fresh *limitedConn
	var idleSince, freshSince time.Time
	for lc, e := range c.conns {
		state, since := e.get()
		switch {
		case state == http.StateIdle && (idle == nil || since.Before(idleSince)):
			idle, idleSince = lc, since
		case state == http.StateNew && now.Sub(since) >= stateNewGrace && (fresh == nil || since.Before(freshSince)):
			fresh, freshSince = lc, since
		}
	}
	if idle != nil {
		return idle
	}
	return fresh
}

// dropLocked frees lc's slot. c.mu held.
func (c *connLimiter) dropLocked(lc *limitedConn) {
	if e, ok := c.conns[lc]; ok {
		e.timer.Stop()
		delete(c.conns, lc)
	}
}

func (c *connLimiter) release(lc *limitedConn) {
	c.mu.Lock()
	c.dropLocked(lc)
	c.mu.Unlock()
}

// limitListener is a net.Listener whose Accept refuses (closes) connections
// beyond its connLimiter's cap that no idle connection can make room for.
type limitListener struct {
	net.Listener
	c *connLimiter
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: conn, c: l.c}
		if l.c.admit(lc) {
			return lc, nil
		}
		_ = conn.Close() // refused: every slot is busy or just opened
	}
}

// limitedConn gives its slot back on Close.
type limitedConn struct {
	net.Conn
	c     *connLimiter
	entry *connEntry // its state, set by admit (kept after its slot is freed)
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.c.release(c)
	return err
}

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
func withBodyTimeout(d time.Duration, h http.Handler) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
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
		b := &timedBody{ReadCloser: r.Body}
		b.timer = time.AfterFunc(d, b.expire)
		defer b.timer.Stop()
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
type timedBody struct {
	io.ReadCloser
	timer   *time.Timer
	expired atomic.Bool
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
		b.timer.Stop()
	case err != nil && b.expired.Load():
		err = fmt.Errorf("request body not read in time: %w", os.ErrDeadlineExceeded)
	}
	return n, err
}
