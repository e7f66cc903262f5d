package httpapi

import (
	"errors"
	"net"
	"net/http"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/sdk/h2hold"
	"github.com/ticketd/ticketd/server/security"
)

// This file serves the client API: its protocols, TLS and the limits that
// protect the node from slow or idle clients
// (docs/security.md#transport-security).

// newAPIServer builds the client API's http.Server: the handler, the
// protocols (h2c, or HTTP/1.1 and HTTP/2 over TLS when the node has a
// certificate, with client certificates required under client_cert_auth),
// the header, idle and stream limits, and the connection cap's ConnState
// hook (connlimit.go). An HTTP/2 connection on which no byte can be
// written for limits.stream_write_timeout_ms is closed
// (WriteByteTimeout): a client that stops reading its socket altogether
// stalls every stream of the connection, and the reset of one stream
// (streamwrite.go) is itself a frame that cannot be sent then.
func (s *Server) newAPIServer(c Config) *http.Server {
	l := c.Config.Limits
	srv := &http.Server{
		Handler:           s.handler(c),
		ErrorLog:          zap.NewStdLog(c.Log.Named("http")),
		Protocols:         protocols(),
		ReadHeaderTimeout: ms(l.ReadHeaderTimeoutMS),
		IdleTimeout:       ms(l.IdleTimeoutMS),
		MaxHeaderBytes:    l.MaxHeaderBytes,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: l.MaxConcurrentStreams, WriteByteTimeout: ms(l.StreamWriteTimeoutMS)},
		ConnState:         s.limiter.connState,
	}
	if s.apiCert != nil {
		srv.Protocols = tlsProtocols()
		srv.TLSConfig = security.ServerConfig(s.apiCert, c.Config.ClientCertAuth)
	}
	return srv
}

// protocols is HTTP/1.1 plus unencrypted HTTP/2 (h2c with prior knowledge),
// so Connect, gRPC and gRPC-Web clients share one port without TLS.
func protocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &p
}

// tlsProtocols is HTTP/1.1 and HTTP/2 over TLS, chosen by ALPN.
func tlsProtocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	return &p
}

// Serve accepts API connections on l until Close: plaintext h2c, or TLS
// (HTTP/2 by ALPN and HTTP/1.1) when the node has a certificate (cert_file).
// Open connections are capped (limits.max_connections): a connection beyond
// the cap takes the slot of the oldest idle one (or of one silent past its
// grace), else it is refused (closed); see connLimiter. Plaintext
// connections buffer their reads (readbuffer.go) and write a response's
// HEADERS frame together with its body (package sdk/h2hold, which also
// keeps their HTTP/2 write bound, WriteByteTimeout, below net/http). It returns
// http.ErrServerClosed after Close. Only one Serve call is allowed.
func (s *Server) Serve(l net.Listener) error {
	if !s.served.CompareAndSwap(false, true) {
		return errors.New("ticketd: Serve called twice")
	}
	if s.api.TLSConfig != nil {
		return s.api.ServeTLS(s.limiter.listener(l), "", "")
	}
	return s.api.Serve(s.limiter.listener(readBufferedListener(h2hold.Listener(l, h2hold.Config{WriteLimit: s.api.HTTP2.WriteByteTimeout}))))
}
