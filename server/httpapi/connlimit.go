package httpapi

import (
	"crypto/tls"
	"net"
	"net/http"
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
