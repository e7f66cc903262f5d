package sdk_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk"
)

// firstWatchErr runs a watch until it yields an error, failing the test if
// it yields an event first.
func firstWatchErr(t *testing.T, c *sdk.Client) error {
	t.Helper()
	for ev, err := range c.Watch(longCtx(t), "jobs/") {
		if err != nil {
			return err
		}
		t.Fatalf("watch yielded %+v before its error", ev)
	}
	t.Fatal("watch ended without an error")
	return nil
}

// A watch fails at once on the connection causes of the client's settings
// that fail every other call at once (connfail.go), instead of retrying
// silently until its ctx ends: a watcher that can never connect must say
// why. Each runs against a real TLS server or a closed port; the long ctx
// (20 s) shows the error is the cause, not the deadline.
func TestWatchPlaintextToTLSFailsAtOnce(t *testing.T) {
	srv, _ := tlsServer(t, false)
	c := newClient(t, []string{strings.TrimPrefix(srv.URL, "https://")})
	err := firstWatchErr(t, c)
	require.ErrorIs(t, err, sdk.ErrServerSpeaksTLS)
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
}

func TestWatchUntrustedServerFailsAtOnce(t *testing.T) {
	srv, handshakes := tlsServer(t, false)
	c := newClient(t, []string{strings.TrimPrefix(srv.URL, "https://")}, sdk.WithTLS(&tls.Config{RootCAs: x509.NewCertPool()}))
	err := firstWatchErr(t, c)
	require.ErrorIs(t, err, sdk.ErrServerCertificate)
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, int32(1), handshakes.Load(), "no retry")
}

func TestWatchMissingClientCertFailsAtOnce(t *testing.T) {
	srv, _ := tlsServer(t, true)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	c := newClient(t, []string{strings.TrimPrefix(srv.URL, "https://")}, sdk.WithTLS(&tls.Config{RootCAs: pool}))
	err := firstWatchErr(t, c)
	require.ErrorIs(t, err, sdk.ErrClientCertificate)
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
}

func TestWatchRefusedEverywhereFailsAtOnce(t *testing.T) {
	c := newClient(t, []string{sdk.ClosedAddr(t), sdk.ClosedAddr(t)})
	err := firstWatchErr(t, c)
	require.ErrorIs(t, err, sdk.ErrConnectionRefused)
	assert.ErrorIs(t, err, sdk.ErrUnavailable)
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
}

// TestObserveRefusedEverywhereFailsAtOnce: Election.Observe, a watch
// underneath, yields the same final error.
func TestObserveRefusedEverywhereFailsAtOnce(t *testing.T) {
	c := newClient(t, []string{sdk.ClosedAddr(t)})
	e := sdk.NewElection(c, 5*time.Second)
	for l, err := range e.Observe(longCtx(t), "leader") {
		require.ErrorIs(t, err, sdk.ErrConnectionRefused, "yielded %+v", l)
		return
	}
	t.Fatal("observe ended without an error")
}
