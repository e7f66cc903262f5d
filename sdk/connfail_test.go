package sdk_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
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

// TestPlaintextCutBeforeFirstRequestNamesTLS: the TLS server cuts a
// plaintext HTTP/2 connection on its preface. When the client's connection
// reader sees that before the first request could use the connection,
// net/http reports "http2: client conn could not be established", without
// the EOF that closed it: the order a busy machine produces at random. It
// must still be ErrServerSpeaksTLS (after one probe handshake). The order
// is forced here: the request is sent on the connection only once its
// state hook reports it closed.
func TestPlaintextCutBeforeFirstRequestNamesTLS(t *testing.T) {
	srv, handshakes := tlsServer(t, false)
	addr := strings.TrimPrefix(srv.URL, "https://")
	ctx := longCtx(t)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true) // h2c with prior knowledge, as the SDK's plaintext client
	cc, err := tr.NewClientConn(ctx, "http", addr)
	require.NoError(t, err)
	defer cc.Close()
	closed := make(chan struct{})
	var once sync.Once
	cc.SetStateHook(func(cc *http.ClientConn) {
		if cc.Err() != nil {
			once.Do(func() { close(closed) })
		}
	})
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("the TLS server did not close the plaintext connection")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	require.NoError(t, err)
	_, err = cc.RoundTrip(req)
	require.ErrorContains(t, err, "could not be established", "the order under test")
	require.NotErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Equal(t, sdk.ErrServerSpeaksTLS, sdk.ConnCause(ctx, "http://"+addr, err))
	assert.Equal(t, int32(1), handshakes.Load(), "one probe handshake")
	// The plaintext client's own check, on the error as connect reports it.
	assert.ErrorIs(t, sdk.ConnCause(ctx, "http://"+addr, connect.NewError(connect.CodeUnavailable, err)), sdk.ErrServerSpeaksTLS)
}

// TestPlaintextWriteAfterCutNamesTLS: a write of a plaintext client that
// the TLS server refused (it closed the connection on the HTTP/2 preface;
// the closed socket answers later bytes with a reset, and writes after
// that fail with EPIPE) names ErrServerSpeaksTLS too: such a write error
// can reach a request before its reader's EOF does.
func TestPlaintextWriteAfterCutNamesTLS(t *testing.T) {
	srv, handshakes := tlsServer(t, false)
	addr := strings.TrimPrefix(srv.URL, "https://")
	ctx := longCtx(t)
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	require.NoError(t, err)
	_, _ = io.ReadAll(conn) // until the server's close: EOF, or a reset
	for !errors.Is(err, syscall.EPIPE) && ctx.Err() == nil {
		_, err = conn.Write([]byte{0}) // succeeds until the server's reset is back
	}
	require.ErrorIs(t, err, syscall.EPIPE)
	assert.Equal(t, sdk.ErrServerSpeaksTLS, sdk.ConnCause(ctx, "http://"+addr, err))
	assert.Equal(t, int32(1), handshakes.Load(), "one probe handshake")
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
// The window is 10 s, not a few hundred ms: the first attempt after the
// server closed may still pick the client's cached HTTP/2 connection before
// its reader has seen the close, and net/http's HTTP/2 transport then
// retries the request itself after a 1 s backoff; a shorter window ends
// inside that backoff, before any refused dial is seen (3 s did, once, on
// a machine busy with other test suites).
func TestRefusedAfterAnswerIsRetried(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newClient(t, fc.endpoints())
	_, err := c.Status(testCtx(t))
	require.NoError(t, err)
	fc.nodes[0].srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.Status(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, sdk.ErrUnavailable)
	assert.NotErrorIs(t, err, sdk.ErrConnectionRefused)
}
