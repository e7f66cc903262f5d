package hashicorp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/internal/peerlimit"
)

// This file is the mutual-TLS peer stream layer.

// handshakeTimeout bounds one TLS handshake of a peer connection this node
// dials; an accepted one is bounded by backends.Config.PeerIdleTimeout (at
// most this), so a peer that connects and says nothing holds no goroutine
// and no file for long.
const handshakeTimeout = 10 * time.Second

// tlsStreamLayer is the raft.StreamLayer of a node with backends.Config.PeerTLS:
// every connection, accepted or dialled, is TLS 1.3 with both certificates
// verified against the peer CA (mutual TLS, as Consul's verify_incoming and
// verify_outgoing do for its Raft port). Accept completes the handshake before
// handing a connection to the NetworkTransport, so a peer without a
// certificate, with one from another CA, or speaking plaintext is refused,
// closed and logged, and never reaches the msgpack decoder. Handshakes run on
// their own goroutines, so a slow peer does not hold up the others.
type tlsStreamLayer struct {
	ln        net.Listener
	advertise net.Addr
	server    *tls.Config
	client    *tls.Config // the PeerTLS given; cloned per dial with the host as ServerName
	log       *zap.Logger
	count     func(peer, kind string) // nil: no PeerObserver
	acceptHS  time.Duration           // bound of an accepted connection's handshake
	// membersAt, when not nil, returns the ids of the members whose raft
	// address is the one dialled (peerMembers.at): the server's
	// certificate must name one of them (verifyServerIdentity).
	membersAt func(address string) (ids []string, known bool)

	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

var _ raft.StreamLayer = (*tlsStreamLayer)(nil)

// newTLSStreamLayer listens on bindAddr (plain TCP capped by limit, TLS on
// top with server, the accepting side of peerTLS) and starts accepting.
// advertise is what Addr returns. An accepted
// connection must complete its handshake within acceptHS (at most
// handshakeTimeout); it is then marked established (peerlimit). count, if
// not nil, counts failed dials ("dial") and refused handshakes either way
// ("handshake").
func newTLSStreamLayer(bindAddr string, advertise net.Addr, server, peerTLS *tls.Config, membersAt func(string) ([]string, bool), limit peerlimit.Config, acceptHS time.Duration, log *zap.Logger, count func(peer, kind string)) (*tlsStreamLayer, error) {
	ln, err := net.Listen("tcp", bindAddr)
	if err != nil {
		return nil, err
	}
	if acceptHS <= 0 || acceptHS > handshakeTimeout {
		acceptHS = handshakeTimeout
	}
	s := &tlsStreamLayer{
		ln:        peerlimit.NewListener(ln, limit),
		acceptHS:  acceptHS,
		advertise: advertise,
		server:    server,
		client:    peerTLS,
		membersAt: membersAt,
		log:       log,
		count:     count,
		conns:     make(chan net.Conn),
		done:      make(chan struct{}),
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// acceptLoop accepts TCP connections and hands each to a handshake goroutine.
func (s *tlsStreamLayer) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.log.Warn("accept peer connection", zap.Error(err))
			select {
			case <-s.done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		s.wg.Add(1)
		go s.handshake(c)
	}
}

// handshake runs the server side of the TLS handshake on c and queues it for
// Accept; a failed handshake is logged with the remote address and closed.
func (s *tlsStreamLayer) handshake(c net.Conn) {
	defer s.wg.Done()
	tc := tls.Server(c, s.server)
	ctx, cancel := context.WithTimeout(context.Background(), s.acceptHS)
	defer cancel()
	go func() { // unblock the handshake on Close
		select {
		case <-s.done:
			_ = c.Close()
		case <-ctx.Done():
		}
	}()
	if err := tc.HandshakeContext(ctx); err != nil {
		s.log.Warn("refused peer connection: TLS handshake failed",
			zap.String("remote", c.RemoteAddr().String()), zap.Error(err))
		s.report(c.RemoteAddr().String(), "handshake")
		_ = c.Close()
		return
	}
	peerlimit.MarkEstablished(c)
	select {
	case s.conns <- tc:
	case <-s.done:
		_ = tc.Close()
	}
}

// Accept returns the next peer connection whose handshake succeeded.
func (s *tlsStreamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting and waits for the handshakes in progress.
func (s *tlsStreamLayer) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.done)
		err = s.ln.Close()
		s.wg.Wait()
	})
	return err
}

// Addr returns the advertised raft address.
func (s *tlsStreamLayer) Addr() net.Addr { return s.advertise }

// Dial opens a TLS connection to address, presenting this node's certificate
// and verifying the peer's against the peer CA with the dialled host as
// server name, and its common name against the member at address
// (verifyServerIdentity); the handshake is complete (or failed) when it
// returns.
func (s *tlsStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	host, _, err := net.SplitHostPort(string(address))
	if err != nil {
		return nil, fmt.Errorf("hashicorp: dial %s: %w", address, err)
	}
	c, err := (&net.Dialer{Timeout: timeout}).Dial("tcp", string(address))
	if err != nil {
		s.log.Warn("peer dial failed", zap.String("peer", string(address)), zap.Error(err))
		s.report(string(address), "dial")
		return nil, fmt.Errorf("hashicorp: dial %s: %w", address, err)
	}
	cfg := backends.PeerClientTLS(s.client, host)
	if s.membersAt != nil {
		prev := cfg.VerifyConnection
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if prev != nil {
				if err := prev(cs); err != nil {
					return err
				}
			}
			return s.verifyServerIdentity(string(address), cs)
		}
	}
	tc := tls.Client(c, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, handshakeTimeout))
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		s.log.Warn("peer TLS handshake failed", zap.String("peer", string(address)), zap.Error(err))
		s.report(string(address), "handshake")
		return nil, fmt.Errorf("hashicorp: dial %s: %w", address, err)
	}
	return tc, nil
}

// verifyServerIdentity refuses the server certificate of a connection
// dialled to address unless its common name is the id of a member the
// latest configuration places at address. Peer identity is membership in
// both directions (docs/security.md#peer-identity-is-membership): hashicorp's
// raft reads a vote grant or an append acknowledgement from the very
// connection it dialled, so a certificate the CA signed for another id (a
// removed member's, one for an id no member has) that answered on a member's
// address (the member down and its port taken, or the address intercepted)
// would count as that member's vote and acknowledgement, and a leader could
// commit without a real quorum (Raft thesis §3.6: a commit needs a majority of
// the configuration's actual servers). Errors wrap ErrForgedSender.
func (s *tlsStreamLayer) verifyServerIdentity(address string, cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%w: %s presented no certificate", ErrForgedSender, address)
	}
	cn := cs.PeerCertificates[0].Subject.CommonName
	ids, known := s.membersAt(address)
	if !known {
		return fmt.Errorf("%w: %s presented %q and the configuration is not loaded yet", ErrForgedSender, address, cn)
	}
	if slices.Contains(ids, cn) {
		return nil
	}
	return fmt.Errorf("%w: %s presented a certificate for %q, the configuration has %q at that address", ErrForgedSender, address, cn, ids)
}

func (s *tlsStreamLayer) report(peer, kind string) {
	if s.count != nil {
		s.count(peer, kind)
	}
}
