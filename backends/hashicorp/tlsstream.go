package hashicorp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/internal/peerlimit"
)

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
func newTLSStreamLayer(bindAddr string, advertise net.Addr, server, peerTLS *tls.Config, limit peerlimit.Config, acceptHS time.Duration, log *zap.Logger, count func(peer, kind string)) (*tlsStreamLayer, error) {
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
// server name; the handshake is complete (or failed) when it returns.
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
	tc := tls.Client(c, backends.PeerClientTLS(s.client, host))
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

func (s *tlsStreamLayer) report(peer, kind string) {
	if s.count != nil {
		s.count(peer, kind)
	}
}
