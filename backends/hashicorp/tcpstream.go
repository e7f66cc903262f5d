package hashicorp

import (
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/backends/internal/peerlimit"
)

// This file is the plaintext peer stream layer.

// tcpStreamLayer is the plaintext raft.StreamLayer (a node without
// backends.Config.PeerTLS): hashicorp's TCPStreamLayer, which cannot be
// built outside its package, plus a count of failed dials, so that a
// boundedStreamLayer can wrap it as it wraps a tlsStreamLayer.
type tcpStreamLayer struct {
	net.Listener
	advertise net.Addr
	count     func(peer, kind string) // nil: no PeerObserver
}

var _ raft.StreamLayer = (*tcpStreamLayer)(nil)

// newTCPStreamLayer listens on bindAddr, capped by limit (peerlimit), and
// advertises advertise, which must be a dialable IP address (not 0.0.0.0 or
// ::, which hashicorp's own TCP transport refuses too).
func newTCPStreamLayer(bindAddr string, advertise *net.TCPAddr, limit peerlimit.Config, count func(peer, kind string)) (*tcpStreamLayer, error) {
	if advertise.IP == nil || advertise.IP.IsUnspecified() {
		return nil, fmt.Errorf("raft address %s is not advertisable", advertise)
	}
	ln, err := net.Listen("tcp", bindAddr)
	if err != nil {
		return nil, err
	}
	return &tcpStreamLayer{Listener: peerlimit.NewListener(ln, limit), advertise: advertise, count: count}, nil
}

// Addr returns the advertised raft address.
func (s *tcpStreamLayer) Addr() net.Addr { return s.advertise }

// Dial opens a TCP connection to address within timeout.
func (s *tcpStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		if s.count != nil {
			s.count(string(address), "dial")
		}
		return nil, err
	}
	return c, nil
}
