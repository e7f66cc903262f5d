package sdk

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestUntrustedServerFailsAtOnce: a client that does not trust the server's
// certificate gives up after the first handshake instead of retrying until
// its deadline (found by a new user: a missing --cacert took 15 s to fail).
// A real TLS server counts the handshakes it sees.
func TestUntrustedServerFailsAtOnce(t *testing.T) {
	var handshakes atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		handshakes.Add(1)
		return nil, nil
	}}
	srv.StartTLS()
	defer srv.Close()

	c, err := New([]string{strings.TrimPrefix(srv.URL, "https://")}, WithTLS(&tls.Config{RootCAs: x509.NewCertPool()}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.Status(ctx)
	var verify *tls.CertificateVerificationError
	if !errors.As(err, &verify) {
		t.Fatalf("Status: %v; want the certificate verification error", err)
	}
	if !errors.Is(err, ErrServerCertificate) {
		t.Fatalf("Status: %v; want ErrServerCertificate", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Status retried until its deadline: %v", err)
	}
	if n := handshakes.Load(); n != 1 {
		t.Fatalf("%d handshakes; want 1 (no retry)", n)
	}
}
