package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// UpgradeProtocol is the Upgrade token (RFC 9110 section 7.8) with which
// a GET to StreamPath turns its HTTP/1.1 connection into a message stream:
// after the receiver's 101 the sender's goroutine writes batches straight
// to the connection and the receiver's handler reads them straight off it,
// so a message passes two goroutines between the raft loops instead of
// five over HTTP/2 (docs/benchmarks.md, "Where an etcd commit's time goes
// at one client"). net/http upgrades connections the same way for
// WebSocket (RFC 6455 section 4) and h2c (RFC 7540 section 3.2).
const UpgradeProtocol = "ticketd-raft-stream/1"

// errUpgradeRefused: the peer does not serve upgraded streams (a node of
// the previous release); the sender falls back to the HTTP/2 stream.
var errUpgradeRefused = errors.New("transport: peer refused the stream upgrade")

// upgradeALPN is what a sender offers by ALPN for an upgraded stream: a
// receiver of this release prefers http/1.1; one of the previous release
// serves h2 only and picks it, which tells the sender to fall back.
var upgradeALPN = []string{"http/1.1", "h2"}

// connStream is a message stream on a connection of its own, upgraded to
// UpgradeProtocol: the peer's run goroutine writes it, a goroutine of its
// own waits for the receiver to end it.
type connStream struct {
	conn    net.Conn
	timeout time.Duration // bounds one write: Config.SendTimeout
	done    chan struct{} // closed when the waiting goroutine has finished
}

// openConnStream dials p, asks for the upgrade and returns the stream once
// the receiver answered 101. Errors: the dial's or handshake's;
// ErrMisdirected (421); errUpgradeRefused when p negotiated HTTP/2 by ALPN
// or answered 404 or 405; any other status as an error. The dial, the
// request and the answer are bounded by Config.SendTimeout and by Close.
func (t *Transport) openConnStream(p *peer) (*connStream, error) {
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.SendTimeout)
	defer cancel()
	addr := *p.addr.Load()
	conn, err := t.dial(ctx, addr, upgradeALPN)
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*tls.Conn); ok && tc.ConnectionState().NegotiatedProtocol == "h2" {
		_ = conn.Close()
		return nil, fmt.Errorf("%w: %s negotiated HTTP/2", errUpgradeRefused, addr)
	}
	if err := t.upgrade(ctx, conn, p); err != nil {
		_ = conn.Close()
		return nil, err
	}
	s := &connStream{conn: conn, timeout: t.cfg.SendTimeout, done: make(chan struct{})}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer close(s.done)
		// The receiver never writes after its 101: a byte from it, or the
		// end of the connection (it refused a message, timed out, or
		// stopped), ends the stream, so the next write fails and the
		// sender reconnects.
		_, _ = conn.Read(make([]byte, 1))
		_ = conn.Close()
	}()
	return s, nil
}

// maxUpgradeAnswer bounds, in bytes, what the sender reads of a receiver's
// answer to the upgrade request (status line, headers and a refusal's
// body): a 101 is about a hundred bytes and a refusal one line, so a peer
// answering with endless headers or body (a compromised member, or a
// process that took a member's address) costs the sender at most 64 KiB,
// not whatever it sends until SendTimeout. net/http's client bounds a
// response's headers the same way (Transport.MaxResponseHeaderBytes).
const maxUpgradeAnswer = 64 << 10

// upgrade writes the GET asking p for the upgrade on conn and reads the
// answer, until ctx is done. Errors: those of openConnStream; ErrTooLarge
// (counted as "oversize") for an answer longer than maxUpgradeAnswer;
// ErrBadBatch (counted as "read") for bytes sent after the 101, where the
// receiver sends nothing.
func (t *Transport) upgrade(ctx context.Context, conn net.Conn, p *peer) error {
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	req, err := t.newRequest(ctx, http.MethodGet, p, StreamPath, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", UpgradeProtocol)
	if err := req.Write(conn); err != nil {
		return fmt.Errorf("transport: stream to %d: %w", p.id, err)
	}
	answer := &io.LimitedReader{R: conn, N: maxUpgradeAnswer}
	br := bufio.NewReader(answer)
	resp, err := http.ReadResponse(br, req)
	if err == nil {
		_ = resp.Body.Close() // a 1xx answer has no body; others are refusals
	}
	if answer.N == 0 {
		t.countError(*p.addr.Load(), "oversize")
		return fmt.Errorf("transport: stream to %d: %w: answer to the upgrade longer than %d bytes", p.id, ErrTooLarge, maxUpgradeAnswer)
	}
	if err != nil {
		return fmt.Errorf("transport: stream to %d: %w", p.id, err)
	}
	switch {
	case resp.StatusCode == http.StatusSwitchingProtocols && strings.EqualFold(resp.Header.Get("Upgrade"), UpgradeProtocol):
		if br.Buffered() > 0 {
			t.countError(*p.addr.Load(), "read")
			return fmt.Errorf("transport: stream to %d: %w: bytes after the 101", p.id, ErrBadBatch)
		}
	case resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusMethodNotAllowed:
		return fmt.Errorf("%w: %s answered %s", errUpgradeRefused, *p.addr.Load(), resp.Status)
	case resp.StatusCode == http.StatusMisdirectedRequest:
		return fmt.Errorf("%w: %s is not raft node %d", ErrMisdirected, *p.addr.Load(), p.id)
	default:
		return fmt.Errorf("transport: stream to %d: %s", p.id, resp.Status)
	}
	if !stop() {
		return fmt.Errorf("transport: stream to %d: %w", p.id, context.Cause(ctx))
	}
	return conn.SetDeadline(time.Time{})
}

// write sends body on the connection within the stream's timeout.
func (s *connStream) write(body []byte) error {
	if err := s.conn.SetWriteDeadline(time.Now().Add(s.timeout)); err != nil {
		return err
	}
	_, err := s.conn.Write(body)
	return err
}

// close ends the stream and waits for its goroutine.
func (s *connStream) close() {
	_ = s.conn.Close()
	<-s.done
}

// serveUpgrade receives a peer's message stream on an upgraded connection:
// the checks of every stream first (421 for another node's, 403 for a
// certificate naming no current member), then 101, and from then on this
// goroutine reads the connection itself (receive) until the stream ends,
// no byte has arrived for IdleTimeout, or a message is refused. A GET
// without the upgrade is answered 426 (HTTP/2 has no upgrade: its
// requests carry no Connection header).
func (t *Transport) serveUpgrade(w http.ResponseWriter, r *http.Request) {
	if !headerHasToken(r.Header, "Connection", "upgrade") || !headerHasToken(r.Header, "Upgrade", UpgradeProtocol) {
		w.Header().Set("Connection", "Upgrade")
		w.Header().Set("Upgrade", UpgradeProtocol)
		http.Error(w, "transport: "+StreamPath+" takes a GET upgrading an HTTP/1.1 connection to "+UpgradeProtocol, http.StatusUpgradeRequired)
		return
	}
	in, ok := t.acceptStream(w, r)
	if !ok {
		return
	}
	// Counted from here: once hijacked, the connection's goroutine (this
	// one) is no longer counted by connState, and Close must wait for it.
	t.wg.Add(1)
	defer t.wg.Done()
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, err.Error(), http.StatusHTTPVersionNotSupported)
		return
	}
	if !t.upgraded.add(conn) {
		_ = conn.Close() // the transport is closing
		return
	}
	defer t.upgraded.remove(conn)
	// Bytes the sender wrote after its request, already buffered.
	pending, _ := brw.Reader.Peek(brw.Reader.Buffered())
	pending = bytes.Clone(pending)
	if err := conn.SetWriteDeadline(time.Now().Add(t.cfg.IdleTimeout)); err != nil {
		return
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+UpgradeProtocol+"\r\n\r\n"); err != nil {
		t.countError(in.remote, "write")
		return
	}
	if in.bound {
		// The stream ends when cn's member is removed (Gate.Refresh).
		defer t.cfg.Gate.Track(in.cn, in.remote, func() { _ = conn.Close() })()
	}
	var src io.Reader = idleReader{conn: conn, d: t.cfg.IdleTimeout}
	if len(pending) > 0 {
		src = io.MultiReader(bytes.NewReader(pending), src)
	}
	t.receive(t.ctx, bufio.NewReaderSize(src, 64<<10), in)
}

// headerHasToken reports whether a comma-separated value of header name
// in h holds token, compared without case (RFC 9110 section 5.6.1).
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}

// idleReader reads conn, failing a read that waits longer than d for a
// byte (os.ErrDeadlineExceeded): a stream on which nothing arrives for
// IdleTimeout is ended, while the sender's keepalive frames arrive four
// times as often.
type idleReader struct {
	conn net.Conn
	d    time.Duration
}

func (r idleReader) Read(b []byte) (int, error) {
	if err := r.conn.SetReadDeadline(time.Now().Add(r.d)); err != nil {
		return 0, err
	}
	return r.conn.Read(b)
}

// upgradedConns is the set of accepted connections that became message
// streams: hijacked from http.Server, which no longer closes them, so
// Transport.Close does (closeAll).
type upgradedConns struct {
	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
}

// add registers c; false once closeAll has run (the caller closes c).
func (u *upgradedConns) add(c net.Conn) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return false
	}
	if u.conns == nil {
		u.conns = map[net.Conn]struct{}{}
	}
	u.conns[c] = struct{}{}
	return true
}

// remove closes c and forgets it.
func (u *upgradedConns) remove(c net.Conn) {
	u.mu.Lock()
	delete(u.conns, c)
	u.mu.Unlock()
	_ = c.Close()
}

// closeAll closes every registered connection and refuses new ones.
func (u *upgradedConns) closeAll() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	for c := range u.conns {
		_ = c.Close()
	}
}
