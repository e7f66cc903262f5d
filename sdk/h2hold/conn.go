package h2hold

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultHold is how long a held HEADERS frame waits for the next write
// before a timer writes it alone: the most a stream's headers are delayed.
const DefaultHold = time.Millisecond

// maxHeldCap is the largest buffer a connection keeps for held frames
// between writes (bytes): a HEADERS frame and a small DATA frame fit; a
// large write after a held frame is copied once and its buffer dropped.
const maxHeldCap = 4 << 10

// Config sets how a Conn holds frames.
type Config struct {
	// Hold is how long a lone HEADERS frame waits for the next write
	// (0: DefaultHold).
	Hold time.Duration
	// WriteLimit bounds every write of an HTTP/2 connection, the timer's
	// and those from above, as http.HTTP2Config.WriteByteTimeout does: a
	// write that cannot put a byte on the wire for WriteLimit fails, and
	// the HTTP/2 code then closes the connection (0: no bound). Set it to
	// the WriteByteTimeout of the HTTP/2 server above; the Conn then keeps
	// the deadline itself (see Conn.SetWriteDeadline).
	WriteLimit time.Duration
}

// rearmAfter is the fraction of Config.WriteLimit after which a write sets
// the connection's write deadline again: writes within WriteLimit/16 of
// the last setting share it, so a write is cut after 15/16 to 16/16 of
// WriteLimit without progress.
const rearmAfter = 16

func (cfg Config) hold() time.Duration {
	if cfg.Hold > 0 {
		return cfg.Hold
	}
	return DefaultHold
}

// What a Conn knows of its protocol.
const (
	undecided int32 = iota // the deciding read or write has not happened
	plain                  // not HTTP/2 (HTTP/1.x, TLS): every write as it comes
	h2                     // HTTP/2: lone HEADERS frames are held
)

// Conn is a net.Conn that, once it knows it carries HTTP/2, holds a write
// that is one lone HEADERS frame (LoneHeaders) until the next write or the
// hold, whichever comes first, and, with a Config.WriteLimit, bounds its
// writes itself. Reads, read deadlines and the other writes are the
// connection's. Like any net.Conn it expects one reader at a time;
// writes may come from any goroutine (the HTTP/2 server and transport
// write from one goroutine at a time, the timer from another).
type Conn struct {
	net.Conn
	cfg     Config
	client  bool         // the first write decides (Client); else the first read (Server)
	checked bool         // Server: the first read has been looked at (reader only)
	state   atomic.Int32 // undecided, plain or h2

	mu    sync.Mutex
	held  []byte      // a lone HEADERS frame not written yet
	timer *time.Timer // writes held after the hold; made at the first hold
	err   error       // the timer's failed write, returned by every later Write
	armed time.Time   // HTTP/2 with a WriteLimit: the write deadline last set (zero: none)
}

// Server returns c, a connection a server accepted, holding lone HEADERS
// frames once its first read shows the HTTP/2 client preface. Writes
// before that first read are not held.
func Server(c net.Conn, cfg Config) *Conn { return &Conn{Conn: c, cfg: cfg} }

// Client returns c, a connection a client dialled, holding lone HEADERS
// frames once its first write is the HTTP/2 client preface (h2c with prior
// knowledge); a connection whose first write is anything else (a TLS
// ClientHello, an HTTP/1.x request) is never held.
func Client(c net.Conn, cfg Config) *Conn { return &Conn{Conn: c, cfg: cfg, client: true} }

func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.client && !c.checked && n > 0 {
		c.checked = true
		c.state.CompareAndSwap(undecided, c.decide(p[:n]))
	}
	return n, err
}

func (c *Conn) decide(first []byte) int32 {
	if IsPreface(first) {
		return h2
	}
	return plain
}

// Write writes p, after the held frame if there is one (copied behind it,
// in one write), or holds p when it is a lone HEADERS frame. It returns
// how much of p was written (all of a held p).
func (c *Conn) Write(p []byte) (int, error) {
	switch c.state.Load() {
	case plain:
		return c.Conn.Write(p)
	case undecided:
		if !c.client {
			return c.Conn.Write(p) // a server's writes before its first read
		}
		c.state.CompareAndSwap(undecided, c.decide(p)) // a client's first write
		if c.state.Load() == plain {
			return c.Conn.Write(p)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if len(c.held) == 0 {
		if !LoneHeaders(p) {
			c.armLocked()
			return c.Conn.Write(p)
		}
		c.held = append(c.held, p...)
		if c.timer == nil {
			c.timer = time.AfterFunc(c.cfg.hold(), c.writeHeld)
		} else {
			c.timer.Reset(c.cfg.hold())
		}
		return len(p), nil
	}
	c.timer.Stop()
	held := len(c.held)
	c.held = append(c.held, p...)
	c.armLocked()
	n, err := c.Conn.Write(c.held)
	c.held = c.held[:0]
	if cap(c.held) > maxHeldCap {
		c.held = nil // a large write came after: do not keep its buffer
	}
	return max(n-held, 0), err
}

// writeHeld is the timer's: it writes the held frame alone, bounded by
// Config.WriteLimit. A failure fails every later Write (the HTTP/2 code
// then closes the connection, as after a failed write of its own).
func (c *Conn) writeHeld() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.held) == 0 {
		return
	}
	c.armLocked()
	if _, err := c.Conn.Write(c.held); err != nil {
		c.err = err
	}
	c.held = c.held[:0]
}

// armLocked bounds the write about to start on an HTTP/2 connection with a
// Config.WriteLimit: the connection's write deadline is set to
// WriteLimit from now unless the last setting is younger than
// WriteLimit/rearmAfter. c.mu must be held.
func (c *Conn) armLocked() {
	if c.cfg.WriteLimit <= 0 {
		return
	}
	t := time.Now().Add(c.cfg.WriteLimit)
	if !c.armed.IsZero() && t.Sub(c.armed) < c.cfg.WriteLimit/rearmAfter {
		return
	}
	_ = c.Conn.SetWriteDeadline(t)
	c.armed = t
}

// SetWriteDeadline sets the connection's write deadline, except on an
// HTTP/2 connection with a Config.WriteLimit, which bounds every write
// itself (armLocked), and where it does nothing. net/http's HTTP/2 server
// with a WriteByteTimeout sets a deadline before every write to the
// connection and clears it after: two updates of the runtime's deadline
// timer per flush, about 1 % of the instructions of a unary call
// (docs/benchmarks.md, "The API call path at 64 clients"), which the
// Conn's own bound, set again only every WriteLimit/rearmAfter, makes
// unnecessary.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if c.ownsWriteDeadline() {
		return nil
	}
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline sets the read deadline, and the write deadline as
// SetWriteDeadline does.
func (c *Conn) SetDeadline(t time.Time) error {
	if c.ownsWriteDeadline() {
		return c.Conn.SetReadDeadline(t)
	}
	return c.Conn.SetDeadline(t)
}

// ownsWriteDeadline reports whether the Conn bounds its writes itself: it
// carries HTTP/2 and has a Config.WriteLimit.
func (c *Conn) ownsWriteDeadline() bool {
	return c.cfg.WriteLimit > 0 && c.state.Load() == h2
}

// Close closes the connection (ending a write of the timer in progress)
// and drops a held frame: a connection closed without a write after it
// loses what it had not written, as it would have lost the frame's own
// flush racing the close.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.held = nil
	c.mu.Unlock()
	return err
}
