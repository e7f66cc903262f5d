package sdk

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"
)

// This file tells apart the connection failures whose cause is a setting of
// the client, so that a call fails at once naming it instead of retrying
// until its deadline: retrying cannot fix a plaintext client talking to a
// TLS port, a server certificate the client does not trust, a client
// certificate the server refuses, or endpoints where nothing listens. Only
// causes retrying can fix (an election, a node restarting, a timeout) spend
// the retry budget.

// Sentinels of connection failures caused by the client's settings. Each is
// final (not retried) and matched by errors.Is; the error also wraps the
// transport's own error.
var (
	// ErrServerSpeaksTLS: the client sent plaintext (no WithTLS, http://
	// endpoints) to a port whose server speaks TLS. Use WithTLS with the
	// cluster's CA (ticketctl --cacert).
	ErrServerSpeaksTLS = errors.New("ticketd: the server speaks TLS; this client sent plaintext (use WithTLS with the cluster's CA)")
	// ErrServerCertificate: the client does not trust the server's
	// certificate (unknown authority, a name that does not match the
	// endpoint, expired). Give WithTLS the CA that signed the servers'
	// certificates (ticketctl --cacert).
	ErrServerCertificate = errors.New("ticketd: the server's certificate is not trusted (give WithTLS the CA that signed it)")
	// ErrClientCertificate: the server refused the TLS handshake over the
	// client's certificate: it requires one and none was given, or it does
	// not accept the one given (another CA, expired, revoked). Give WithTLS
	// a certificate of the cluster's client CA (ticketctl --cert, --key).
	ErrClientCertificate = errors.New("ticketd: the server refused this client's certificate (give WithTLS a client certificate the cluster accepts)")
	// ErrConnectionRefused: every endpoint refused the connection (nothing
	// listens there) before any server of this client ever answered: the
	// endpoints are wrong or the cluster is not running. It also matches
	// ErrUnavailable. Once some server has answered, refused connections
	// are retried as a restart would cause them.
	ErrConnectionRefused = errors.New("ticketd: connection refused by every endpoint (check the endpoints, and that the cluster runs)")
)

// tlsProbeTimeout bounds the TLS handshake that probeTLS attempts.
const tlsProbeTimeout = time.Second

// certCause returns ErrServerCertificate or ErrClientCertificate for a TLS
// handshake that failed on a certificate, else nil. crypto/tls reports this
// client's refusal of the server's certificate as x509 errors, and the
// server's alert about the client's as a *net.OpError whose Op is "remote
// error" (certificate required, bad or unknown certificate, unknown CA).
func certCause(err error) error {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		op       *net.OpError
	)
	switch {
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &invalid):
		return ErrServerCertificate
	case errors.As(err, &op) && op.Op == "remote error":
		// The alert is the peer's verdict on this client's handshake; the
		// ones about certificates (RFC 8446 §6.2) name the client's.
		if s := op.Err.Error(); strings.Contains(s, "certificate") || strings.Contains(s, "unknown certificate authority") {
			return ErrClientCertificate
		}
	}
	return nil
}

// tlsRefused reports whether err is a TLS handshake that failed on a
// certificate, on either side (certCause).
func tlsRefused(err error) bool { return certCause(err) != nil }

// connRefused reports whether err is a refused TCP connection (nothing
// listens at the address).
func connRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// h2ConnNotEstablished is the text of the error net/http's HTTP/2 client
// gives the first request of a connection that closed before the request
// could open a stream on it (errClientConnNotEstablished in
// golang.org/x/net/http2 and net/http's bundled copy; unexported, hence
// matched by its text). It carries no cause: the read error that closed
// the connection (EOF, a reset) is dropped.
const h2ConnNotEstablished = "http2: client conn could not be established"

// cutBeforeAnswer reports whether err is a connection the server ended
// before any HTTP answer, with no status from a server: what a TLS server
// does to a plaintext HTTP/2 client, whose preface ("PRI * HTTP/2.0") is
// not a TLS record. crypto/tls fails the handshake on that first record
// and net/http's server closes the connection (it answers 400 only to a
// record header that looks like HTTP/1: "GET /", "POST "...). The client
// sees that close in whichever way its goroutines get to it first: the
// connection's reader reads the cut (EOF, unexpected EOF, a reset), a
// write of the request meets it (a reset, then EPIPE: the closed socket
// answered the request's first bytes with a reset), or the reader marked
// the connection closed before the request could use it
// (h2ConnNotEstablished). On a busy machine each happens.
func cutBeforeAnswer(err error) bool {
	if err == nil || connect.IsWireError(err) {
		return false
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), h2ConnNotEstablished)
}

// probeTLS reports whether the server at base (an http:// URL) answers a
// TLS handshake: a TLS ServerHello is proof that it speaks TLS, whatever
// its certificate. Nothing but a ClientHello is sent, and the certificate
// is not checked, as no request follows. Bounded by tlsProbeTimeout.
func probeTLS(ctx context.Context, base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, tlsProbeTimeout)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // a probe: no request follows
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		// A server that asked for a client certificate and refused the
		// handshake spoke TLS too.
		return certCause(err) == ErrClientCertificate
	}
	_ = conn.Close()
	return true
}

// plaintextToTLS reports whether a plaintext client's attempt at n failed
// because n speaks TLS: the connection was cut before any answer and a TLS
// handshake with n succeeds.
func (c *Client) plaintextToTLS(ctx context.Context, n *node, err error) bool {
	return c.scheme == "http" && cutBeforeAnswer(err) && probeTLS(ctx, n.url)
}

// refusals counts, over one call, the configured endpoints that refused
// the connection, so that a call to endpoints where nothing listens fails
// once each was tried, before any server ever answered the client.
type refusals map[string]bool

// add records that n refused err's connection (if it did) and reports
// whether every configured endpoint has, with no server of c ever having
// answered: ErrConnectionRefused.
func (r refusals) add(c *Client, n *node, err error) bool {
	if !connRefused(err) || c.answered.Load() {
		return false
	}
	r[n.url] = true
	for _, e := range c.endpoints {
		if !r[e] {
			return false
		}
	}
	return true
}

// connErr is the final error of a call that failed on a connection cause
// of the client's settings: the operation, the sentence naming the fix, and
// the transport's error (with ErrUnavailable for refused connections).
func connErr(op, key string, cause, err error) error {
	errs := []error{cause, err}
	if cause == ErrConnectionRefused {
		errs = append(errs, ErrUnavailable)
	}
	return &opError{msg: opKey(op, key) + ": " + cause.Error() + ": " + err.Error(), errs: errs}
}

// ConnCause returns the cause of the client's settings behind err, the
// failure of a request that a caller's own HTTP client sent to base (an
// http:// or https:// URL): ErrServerCertificate or ErrClientCertificate
// for a TLS handshake refused over a certificate, ErrServerSpeaksTLS for a
// plaintext request to a TLS server (probed with one TLS handshake), else
// nil. It lets a tool that makes its own requests (ticketctl endpoint
// health's GET /readyz) name the same fix a Client's calls do.
func ConnCause(ctx context.Context, base string, err error) error {
	if err == nil {
		return nil
	}
	if cause := certCause(err); cause != nil {
		return cause
	}
	if strings.HasPrefix(base, "http://") && cutBeforeAnswer(err) && probeTLS(ctx, base) {
		return ErrServerSpeaksTLS
	}
	return nil
}
