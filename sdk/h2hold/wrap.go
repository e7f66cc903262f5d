package h2hold

import (
	"context"
	"net"
)

// Listener returns l whose accepted connections hold lone HEADERS frames
// (Server).
func Listener(l net.Listener, cfg Config) net.Listener {
	return listener{Listener: l, cfg: cfg}
}

type listener struct {
	net.Listener
	cfg Config
}

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Server(c, l.cfg), nil
}

// DialFunc dials a connection, as net.Dialer.DialContext and
// http.Transport.DialContext do.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Dialer returns dial whose connections hold lone HEADERS frames (Client).
// Set as an http.Transport's DialContext it wraps the transport's h2c
// connections, and leaves its TLS connections (dialled by the same
// function, the handshake above it) and HTTP/1.x ones as they are.
func Dialer(dial DialFunc, cfg Config) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return Client(c, cfg), nil
	}
}
