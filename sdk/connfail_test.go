package sdk_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk"
)

// tlsServer starts a real HTTP/2 TLS server that counts the handshakes it
// sees; with clientCert it requires a client certificate.
func tlsServer(t *testing.T, clientCert bool) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var handshakes atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	srv.EnableHTTP2 = true
	auth := tls.NoClientCert
	if clientCert {
		auth = tls.RequireAnyClientCert
	}
	srv.TLS = &tls.Config{ClientAuth: auth, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		handshakes.Add(1)
		return nil, nil
	}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &handshakes
}

// A long ctx: each of these calls must fail on its cause, not on the
// deadline, which is why the tests check the error is not the ctx's.
func longCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestPlaintextToTLSFailsAtOnce: a client without WithTLS whose endpoint
// speaks TLS fails with ErrServerSpeaksTLS on its first attempt (the TLS
// server cuts the plaintext HTTP/2 preface; a probe handshake then
// succeeds), instead of retrying "unexpected EOF" until its deadline.
func TestPlaintextToTLSFailsAtOnce(t *testing.T) {
	srv, handshakes := tlsServer(t, false)
	c := newClient(t, []string{strings.TrimPrefix(srv.URL, "https://")})
	_, err := c.Status(longCtx(t))
	require.ErrorIs(t, err, sdk.ErrServerSpeaksTLS)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "not retried until the deadline")
	assert.Equal(t, int32(1), handshakes.Load(), "one probe handshake, no retries")
}

// TestMissingClientCertFailsAtOnce: a server that requires a client
// certificate refuses the handshake of a client that has none: one
// handshake, ErrClientCertificate.
func TestMissingClientCertFailsAtOnce(t *testing.T) {
	srv, handshakes := tlsServer(t, true)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	c := newClient(t, []string{strings.TrimPrefix(srv.URL, "https://")}, sdk.WithTLS(&tls.Config{RootCAs: pool}))
	_, err := c.Status(longCtx(t))
	require.ErrorIs(t, err, sdk.ErrClientCertificate)
	assert.NotErrorIs(t, err, sdk.ErrServerCertificate)
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
	// Under TLS 1.3 the server's alert may reach the client only after a
	// first attempt saw a reset connection (retried): a few handshakes at
	// most, not a retry loop until the deadline.
	assert.LessOrEqual(t, handshakes.Load(), int32(3))
}

// TestRefusedEverywhereFailsAtOnce: when every endpoint refuses the
// connection and no server ever answered, the call fails once each was
// tried, with ErrConnectionRefused (and ErrUnavailable).
func TestRefusedEverywhereFailsAtOnce(t *testing.T) {
	c := newClient(t, []string{sdk.ClosedAddr(t), sdk.ClosedAddr(t), sdk.ClosedAddr(t)})
	_, err := c.Status(longCtx(t))
	require.ErrorIs(t, err, sdk.ErrConnectionRefused)
	assert.ErrorIs(t, err, sdk.ErrUnavailable)
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
}

// TestRefusedAfterAnswerIsRetried: once a server has answered the client,
// refused connections are what a restart causes: they are retried until
// the ctx ends, never ErrConnectionRefused.
//
// The window is 3 s, not a few hundred ms: the first attempt after the
// server closed may still pick the client's cached HTTP/2 connection before
// its reader has seen the close, and net/http's HTTP/2 transport then
// retries the request itself after a 1 s backoff; a shorter window ends
// inside that backoff, before any refused dial is seen.
func TestRefusedAfterAnswerIsRetried(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	_, err := c.Status(testCtx(t))
	require.NoError(t, err)
	fc.nodes[0].srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = c.Status(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, sdk.ErrUnavailable)
	assert.NotErrorIs(t, err, sdk.ErrConnectionRefused)
}
