package httpapi

import (
	"bytes"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// This file sends an h2c response's HEADERS frame in one write with the
// DATA frame that follows it, on the client API's plaintext connections.
//
// net/http's HTTP/2 server hands a response to the connection's serve loop
// frame by frame (RFC 9113 §8.1: a HEADERS frame, then DATA frames): the
// handler's goroutine hands over the HEADERS frame and waits until it is in
// the connection's buffer, and the serve loop, finding nothing else to send
// just then, flushes it, usually before the handler is back with the DATA
// frame. So an Acquire's answer left in two write system calls, and the
// client was woken twice: for the headers, whose arrival wakes the caller,
// and again for the body the caller then waits for. At one client that
// second wake-up was the largest single cost of the request path beyond
// the commit (docs/benchmarks.md, "Where a lock cycle's time goes at one
// client"). gRPC-Go's server writes the frames of a response together (its
// "loopy" writer); net/http has no option for it.
//
// So a write that is exactly one response HEADERS frame that does not end
// its stream (a body follows) is held, and written in one system call with
// the next write (copied behind it), which is normally that response's
// DATA frame a few microseconds later. Nothing is reordered: whatever the
// connection writes next goes out after the held bytes. A stream whose
// body does not follow at once (a Watch that sent its headers and waits
// for a change) has its headers written by a timer after holdMax. Only
// HTTP/2 connections are held (those whose first read is the client
// preface, RFC 9113 §3.4); HTTP/1.x connections write as before. TLS
// connections are not wrapped: their frames are not visible below
// crypto/tls.

// holdMax is how long a held HEADERS frame waits for the next write before
// a timer writes it alone (the most a stream's headers are delayed).
const holdMax = time.Millisecond

// maxHeldCap is the largest buffer a connection keeps for held frames
// between writes (bytes): a HEADERS frame and a small DATA frame fit; a
// large write after a held frame is copied once and its buffer dropped.
const maxHeldCap = 4 << 10

// h2Preface is the HTTP/2 client connection preface (RFC 9113 §3.4).
var h2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// HTTP/2 frame header fields (RFC 9113 §4.1, §6.2).
const (
	frameHeaderLen  = 9
	frameHeaders    = 0x1
	flagEndStream   = 0x1
	flagEndHeaders  = 0x4
	streamIDMaskBit = 0x7fffffff
)

// headerHoldListener returns l whose accepted connections hold lone
// response HEADERS frames (headerHoldConn). writeLimit bounds the timer's
// write of a held frame, as http.HTTP2Config.WriteByteTimeout bounds the
// server's writes (0: no bound).
func headerHoldListener(l net.Listener, writeLimit time.Duration) net.Listener {
	return holdListener{Listener: l, limit: writeLimit, hold: holdMax}
}

type holdListener struct {
	net.Listener
	limit time.Duration // the timer's write deadline (0: none)
	hold  time.Duration // holdMax; longer in tests that count writes
}

func (l holdListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &headerHoldConn{Conn: c, limit: l.limit, hold: l.hold}, nil
}

// headerHoldConn is a net.Conn that, once its first read showed the HTTP/2
// preface, holds a write that is one lone response HEADERS frame
// (loneResponseHeaders) until the next write or holdMax, whichever comes
// first. Reads, deadlines and the other writes are the connection's. Like
// any net.Conn it expects one reader at a time; writes may come from any
// goroutine (the HTTP/2 server writes from one goroutine at a time, the
// timer from another).
type headerHoldConn struct {
	net.Conn
	limit   time.Duration // the timer write's deadline (holdListener)
	hold    time.Duration // how long a HEADERS frame is held (holdMax)
	checked bool          // the first read has been looked at (reader only)
	h2      atomic.Bool   // the first read was the HTTP/2 preface

	mu      sync.Mutex
	held    []byte      // a lone HEADERS frame not written yet
	timer   *time.Timer // writes held after hold; made at the first hold
	err     error       // the timer's failed write, returned by every later Write
	cleared bool        // the timer cleared the write deadline since the last Write
}

func (c *headerHoldConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.checked && n > 0 {
		c.checked = true
		c.h2.Store(bytes.HasPrefix(p[:n], h2Preface))
	}
	return n, err
}

// Write writes p, after the held frame if there is one (copied behind it,
// in one write), or holds p when it is a lone response HEADERS frame. It
// returns how much of p was written (all of a held p).
func (c *headerHoldConn) Write(p []byte) (int, error) {
	if !c.h2.Load() {
		return c.Conn.Write(p)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if c.cleared {
		// The server set its deadline before this call, and the timer's
		// write, which this call waited for, cleared it: set it again.
		c.cleared = false
		_ = c.Conn.SetWriteDeadline(time.Now().Add(c.limit))
	}
	if len(c.held) == 0 {
		if !loneResponseHeaders(p) {
			return c.Conn.Write(p)
		}
		c.held = append(c.held, p...)
		if c.timer == nil {
			c.timer = time.AfterFunc(c.hold, c.writeHeld)
		} else {
			c.timer.Reset(c.hold)
		}
		return len(p), nil
	}
	c.timer.Stop()
	held := len(c.held)
	c.held = append(c.held, p...)
	n, err := c.Conn.Write(c.held)
	c.held = c.held[:0]
	if cap(c.held) > maxHeldCap {
		c.held = nil // a large write came after: do not keep its buffer
	}
	return max(n-held, 0), err
}

// writeHeld is the timer's: it writes the held frame alone, bounded by the
// connection's write limit. A failure fails every later Write (the HTTP/2
// server then closes the connection, as after a failed write of its own).
// It clears the deadline it set afterwards, and a Write that waited for it
// sets the server's bound again.
func (c *headerHoldConn) writeHeld() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.held) == 0 {
		return
	}
	if c.limit > 0 {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(c.limit))
		defer func() {
			_ = c.Conn.SetWriteDeadline(time.Time{})
			c.cleared = true
		}()
	}
	if _, err := c.Conn.Write(c.held); err != nil {
		c.err = err
	}
	c.held = c.held[:0]
}

// Close closes the connection (ending a write of the timer in progress) and
// drops a held frame: a connection closed without a write after it loses
// what it had not written, as it would have lost the frame's own flush
// racing the close.
func (c *headerHoldConn) Close() error {
	err := c.Conn.Close()
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.held = nil
	c.mu.Unlock()
	return err
}

// loneResponseHeaders reports whether p is exactly one HTTP/2 HEADERS frame
// with its whole header block (END_HEADERS) on a client-initiated (odd)
// stream, not ending that stream: a response's headers whose body follows.
func loneResponseHeaders(p []byte) bool {
	if len(p) < frameHeaderLen {
		return false
	}
	length := int(p[0])<<16 | int(p[1])<<8 | int(p[2])
	flags := p[4]
	stream := binary.BigEndian.Uint32(p[5:9]) & streamIDMaskBit
	return len(p) == frameHeaderLen+length && p[3] == frameHeaders &&
		flags&flagEndStream == 0 && flags&flagEndHeaders != 0 && stream%2 == 1
}
