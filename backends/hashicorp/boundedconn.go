package hashicorp

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends/internal/peergate"
	"github.com/ticketd/ticketd/backends/internal/peerlimit"
)

// This file bounds the peer connections of hashicorp's transport
// (docs/security.md#peer-transport-bounds): the bytes one request or answer
// may take, read deadlines, and a check of each request's sender.

// readSlack is what a dialled boundedConn allows on top of its message
// bound between two writes: raft.NetworkTransport reads each connection
// through a 256 KiB bufio.Reader (connReceiveBufferSize in
// net_transport.go), so the bytes it pulls from the socket for one answer
// can overshoot it by one buffer, and a pipeline may hold one buffer of the
// next answer when the next request is written.
const readSlack = 2 * 256 << 10

// maxEntryBytes bounds one valid log entry on hashicorp's wire, in bytes:
// the longest Grant core accepts (key 1 KiB, owner 128 B, principal 256 B,
// fixed fields; under 1.5 KiB encoded, TestRPCMessageBound) plus
// raft.Log's own fields, with margin.
const maxEntryBytes = 4 << 10

// rpcMessageBytes bounds one Raft request or answer on the hashicorp
// transport (everything msgpack-decodes), in bytes: maxAppendEntries
// entries of maxEntryBytes, twice, = 4 MiB. Config.MaxMessageBytes lowers
// it, never raises it: it bounds the InstallSnapshot data instead, which
// raft copies into the snapshot file without decoding it.
const rpcMessageBytes = 2 * maxAppendEntries * maxEntryBytes

// minPeerRate is the slowest a peer may send, in bytes per second, on top
// of transportTimeout: InstallSnapshot's data of size bytes must arrive
// within transportTimeout + size/minPeerRate (64 MiB within 74 s).
const minPeerRate = 1 << 20

// boundedConn is one peer connection of the hashicorp transport, accepted
// or dialled, whose reads are bounded (docs/security.md#peer-transport-bounds:
// go-msgpack grows a []byte field 256 KiB at a time and copies it each
// time, so a 63 MiB request cost 6.3 s of CPU and 500 MB; it is now cut at
// rpcMessageBytes).
//
// An accepted connection carries requests, which a msgFramer follows byte
// by byte without decoding them: a request object longer than rpc bytes, a
// field declared longer, or InstallSnapshot data declared longer than
// snapshot bytes is refused before it is read. Over mutual TLS, a request
// whose RPCHeader.ID is not the peer certificate's common name (the member
// id ticketctl cert create-node --id writes) is refused when its header has
// been read, before raft decodes it (ErrForgedSender, counted "identity"):
// a node's certificate cannot speak as another member. A request is also
// refused once the certificate names no current member (peergate: a
// member removed since the connection opened; the gate closes such a
// connection when the removal commits, and refuses a certificate naming no
// member at the handshake already). It also has read deadlines,
// which the NetworkTransport never sets on the serving side: between
// requests, idle (a follower's heartbeat connection gets a request every
// ElectionTimeout/10, its pipeline one every CommitTimeout, so only a
// connection nobody uses is cut); from a request's first byte,
// transportTimeout for the request and transportTimeout +
// size/minPeerRate for a snapshot's data, so a slow or stalled sender
// cannot hold a partly read request. The first answer written marks the
// connection established for the peer connection cap (peerlimit).
//
// A dialled connection carries answers; at most rpc bytes plus readSlack
// may be read between two writes (a leader reads one answer per request it
// wrote). The NetworkTransport sets its own deadlines on it.
//
// Past a bound the connection is closed, logged with the peer's address and
// counted as "oversize" (backends.PeerObserver), and Read fails with
// ErrMessageTooLarge. A deadline that passes fails the read; the
// NetworkTransport then closes the connection. Read and Write may be
// called from different goroutines (the leader's pipeline reads answers
// while it writes requests), as net.Conn allows; Read from one at a time.
type boundedConn struct {
	net.Conn
	limit int64  // dialled: bytes between two writes
	peer  string // remote address (dialled or accepted)
	log   *zap.Logger
	count func(peer, kind string) // nil: no PeerObserver

	// Accepted connections only.
	framer     *msgFramer
	idle       time.Duration
	answered   atomic.Bool // marked established
	unanswered atomic.Int64
	oversize   sync.Once
	untrack    func() // unregisters the connection from the gate; nil: not tracked
}

// Close closes the connection and unregisters it from the peer gate.
func (c *boundedConn) Close() error {
	if c.untrack != nil {
		c.untrack()
	}
	return c.Conn.Close()
}

// Read reads from the connection within its bounds and deadlines.
func (c *boundedConn) Read(p []byte) (int, error) {
	if c.framer != nil {
		return c.readRequests(p)
	}
	n, err := c.Conn.Read(p)
	if n > 0 && c.unanswered.Add(int64(n)) > c.limit {
		return 0, c.refuse(fmt.Errorf("%w: more than %d bytes from %s without an answer", ErrMessageTooLarge, c.limit, c.peer))
	}
	if err != nil && !quietErr(err) {
		c.report("read")
	}
	return n, err
}

// readRequests is Read on an accepted connection.
func (c *boundedConn) readRequests(p []byte) (int, error) {
	if c.framer.idle() {
		_ = c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		started, snapshot, size, ferr := c.framer.feed(p[:n])
		if ferr != nil {
			return 0, c.refuse(fmt.Errorf("from %s: %w", c.peer, ferr))
		}
		switch {
		case snapshot:
			_ = c.Conn.SetReadDeadline(time.Now().Add(transportTimeout + time.Duration(size/minPeerRate)*time.Second))
		case started && !c.framer.idle() && !c.framer.inSnapshot():
			_ = c.Conn.SetReadDeadline(time.Now().Add(transportTimeout))
		}
	}
	if err != nil && !quietErr(err) {
		c.report("read")
	}
	return n, err
}

// refuse closes the connection once, logging and counting it ("identity"
// for ErrForgedSender and peergate.ErrNotMember, else "oversize"), and
// returns err.
func (c *boundedConn) refuse(err error) error {
	c.oversize.Do(func() {
		msg, kind := "refused peer message: too large, connection closed", "oversize"
		switch {
		case errors.Is(err, ErrForgedSender):
			msg, kind = "refused peer message: sender is not the member its certificate names, connection closed", "identity"
		case errors.Is(err, peergate.ErrNotMember):
			msg, kind = "refused peer message: its certificate names no current member, connection closed", "identity"
		}
		c.log.Warn(msg, zap.String("remote", c.peer), zap.Error(err))
		c.report(kind)
		_ = c.Conn.Close()
	})
	return err
}

// Write writes to the connection; it starts a new read allowance.
func (c *boundedConn) Write(p []byte) (int, error) {
	c.unanswered.Store(0)
	if c.framer != nil && !c.answered.Load() {
		c.answered.Store(true)
		peerlimit.MarkEstablished(c.Conn)
	}
	n, err := c.Conn.Write(p)
	if err != nil && !quietErr(err) {
		c.report("write")
	}
	return n, err
}

func (c *boundedConn) report(kind string) {
	if c.count != nil {
		c.count(c.peer, kind)
	}
}

// quietErr reports whether err is the normal end of a connection (closed by
// either side) rather than a transport failure worth counting.
func quietErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed)
}

// boundedStreamLayer wraps every connection of a raft.StreamLayer, accepted
// or dialled, in a boundedConn.
type boundedStreamLayer struct {
	raft.StreamLayer
	rpc      int64 // bytes of one request or answer
	snapshot int64 // bytes of one InstallSnapshot's data
	idle     time.Duration
	gate     *peergate.Gate
	log      *zap.Logger
	count    func(peer, kind string)
}

// newBoundedStreamLayer bounds the connections of sl: a request or answer
// at min(maxMessageBytes, rpcMessageBytes), a snapshot's data at
// maxMessageBytes, idle between requests on an accepted connection; gate
// binds a TLS connection's certificate to membership.
func newBoundedStreamLayer(sl raft.StreamLayer, maxMessageBytes int, idle time.Duration, gate *peergate.Gate, log *zap.Logger, count func(peer, kind string)) *boundedStreamLayer {
	return &boundedStreamLayer{
		StreamLayer: sl,
		rpc:         int64(min(maxMessageBytes, rpcMessageBytes)),
		snapshot:    int64(maxMessageBytes),
		idle:        idle,
		gate:        gate,
		log:         log,
		count:       count,
	}
}

// Accept returns the next accepted connection, bounded and with deadlines.
// A TLS connection whose certificate the gate refuses by now (its member
// removed since the handshake) is closed and skipped: an error would make
// raft's accept loop back off.
func (s *boundedStreamLayer) Accept() (net.Conn, error) {
	for {
		c, err := s.StreamLayer.Accept()
		if err != nil {
			return nil, err
		}
		if bc := s.bound(c); bc != nil {
			return bc, nil
		}
	}
}

// bound wraps the accepted c; nil when its certificate is refused.
func (s *boundedStreamLayer) bound(c net.Conn) *boundedConn {
	f := &msgFramer{maxMessage: s.rpc, maxSnapshot: s.snapshot, member: s.gate.Check}
	bc := &boundedConn{
		Conn: c, peer: c.RemoteAddr().String(), log: s.log, count: s.count,
		framer: f,
		idle:   s.idle,
	}
	tc, ok := c.(*tls.Conn)
	if !ok {
		return bc
	}
	// The handshake is complete (tlsStreamLayer.Accept) and the gate let
	// the certificate in: every request must claim the member it names,
	// and the connection ends when that member is removed (the raw
	// connection is closed: no close_notify write to block on).
	certs := tc.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		_ = c.Close()
		return nil
	}
	f.wantID = certs[0].Subject.CommonName
	raw := tc.NetConn()
	bc.untrack = s.gate.Track(f.wantID, bc.peer, func() { _ = raw.Close() })
	if err := s.gate.Check(f.wantID); err != nil {
		s.gate.Refuse(bc.peer, err)
		_ = bc.Close()
		return nil
	}
	return bc
}

// Dial dials address through the wrapped layer (which counts its own dial
// and handshake failures) and bounds the connection.
func (s *boundedStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := s.StreamLayer.Dial(address, timeout)
	if err != nil {
		return nil, err
	}
	return &boundedConn{Conn: c, limit: s.rpc + readSlack, peer: string(address), log: s.log, count: s.count}, nil
}
