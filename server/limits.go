package server

import (
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimiter caps the client API's open connections. Accept waits while
// the cap is reached; while it waits, the connection idle longest (no
// request read yet, or between requests) is closed to make room, so a flood
// of idle connections cannot lock out a client that sends a request: idle
// ones are shed oldest first, busy ones are never cut. Its connState must be
// the http.Server's ConnState hook. Safe for concurrent use.
type connLimiter struct {
	max int // 0: no cap

	mu    sync.Mutex
	open  int
	idle  map[net.Conn]time.Time // connections in StateNew or StateIdle, since when
	freed chan struct{}          // closed and replaced whenever open drops
}

func newConnLimiter(max int) *connLimiter {
	return &connLimiter{max: max, idle: map[net.Conn]time.Time{}, freed: make(chan struct{})}
}

// listener wraps l with the cap.
func (c *connLimiter) listener(l net.Listener) net.Listener {
	if c.max <= 0 {
		return l
	}
	return &limitListener{Listener: l, c: c}
}

// connState tracks which connections are idle (the http.Server ConnState hook).
func (c *connLimiter) connState(conn net.Conn, s http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch s {
	case http.StateNew, http.StateIdle:
		c.idle[conn] = time.Now()
	default:
		delete(c.idle, conn)
	}
}

// acquire waits for a free slot, shedding the oldest idle connection while
// the cap is reached. It returns false when done is closed first.
func (c *connLimiter) acquire(done <-chan struct{}) bool {
	for {
		c.mu.Lock()
		if c.open < c.max {
			c.open++
			c.mu.Unlock()
			return true
		}
		var victim net.Conn
		var since time.Time
		for conn, t := range c.idle {
			if victim == nil || t.Before(since) {
				victim, since = conn, t
			}
		}
		if victim != nil {
			delete(c.idle, victim)
		}
		freed := c.freed
		c.mu.Unlock()
		if victim != nil {
			go victim.Close() // a TLS close may write an alert: never block Accept
		}
		select {
		case <-freed:
		case <-done:
			return false
		case <-time.After(50 * time.Millisecond): // a busy conn may turn idle
		}
	}
}

func (c *connLimiter) release() {
	c.mu.Lock()
	c.open--
	close(c.freed)
	c.freed = make(chan struct{})
	c.mu.Unlock()
}

// limitListener is a net.Listener whose Accept waits for a connLimiter slot.
type limitListener struct {
	net.Listener
	c         *connLimiter
	closeOnce sync.Once
	done      chan struct{}
	initOnce  sync.Once
}

func (l *limitListener) doneCh() chan struct{} {
	l.initOnce.Do(func() { l.done = make(chan struct{}) })
	return l.done
}

func (l *limitListener) Accept() (net.Conn, error) {
	if !l.c.acquire(l.doneCh()) {
		return nil, net.ErrClosed
	}
	conn, err := l.Listener.Accept()
	if err != nil {
		l.c.release()
		return nil, err
	}
	return &limitedConn{Conn: conn, c: l.c}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.doneCh()) })
	return l.Listener.Close()
}

// limitedConn gives its slot back once, on Close.
type limitedConn struct {
	net.Conn
	c    *connLimiter
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.c.release)
	return err
}

// withBodyTimeout bounds how long reading an HTTP/1.x request's body may
// take: a body trickled slower (slow loris at one byte a second) hits the
// connection's read deadline, the read fails and the connection is closed.
// The deadline is lifted once the body is read, so a request that then waits
// (Acquire with wait, Watch) is not cut. d <= 0 disables it.
//
// HTTP/2 requests are left alone: there a slow body holds one stream of a
// connection (MaxConcurrentStreams) under the connection cap, and a per-stream
// read deadline (http.ResponseController on an HTTP/2 stream) was seen to
// change how a client's cancellation races the request's own deadline
// (e2e TestGhostRelease), so it is not used.
func withBodyTimeout(d time.Duration, h http.Handler) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 1 && r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(d)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline when the body reaches EOF.
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
