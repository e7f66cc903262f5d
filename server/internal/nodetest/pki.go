package nodetest

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/security"
)

// PKI is a CA in a temp dir with a node certificate for 127.0.0.1
// (node-n1.*) and a client certificate (client.orders-svc.*), made by
// package security as `ticketctl cert` makes them.
type PKI struct {
	Dir    string
	CA     *security.KeyPair
	Client *security.KeyPair
}

// NewPKI makes a PKI in t.TempDir(), valid for an hour.
func NewPKI(t testing.TB) PKI {
	t.Helper()
	dir := t.TempDir()
	ca, err := security.CreateCA(dir, time.Hour, false)
	require.NoError(t, err)
	_, err = security.CreateNode(dir, "n1", []string{"127.0.0.1", "localhost"}, time.Hour, false)
	require.NoError(t, err)
	client, err := security.CreateClient(dir, "orders-svc", time.Hour, false)
	require.NoError(t, err)
	return PKI{Dir: dir, CA: ca, Client: client}
}

// Path is the file name of the PKI's directory.
func (p PKI) Path(name string) string { return filepath.Join(p.Dir, name) }

// Pool trusts the CA.
func (p PKI) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.CA.Cert)
	return pool
}

// ClientTLS trusts the CA and presents the client certificate when withCert.
func (p PKI) ClientTLS(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: p.Pool()}
	if withCert {
		c.Certificates = []tls.Certificate{p.Client.TLS()}
	}
	return c
}

// SecureConfig turns on client TLS with client-cert auth on c, with the
// node certificate n1.
func (p PKI) SecureConfig(c *config.Config) {
	c.CertFile, c.KeyFile = p.Path("node-n1.crt"), p.Path("node-n1.key")
	c.TrustedCAFile, c.ClientCertAuth = p.Path("ca.crt"), true
}

// TLSHTTPClient speaks HTTP/2 (ALPN) or, with http1, HTTP/1.1 over TLS;
// every request gives up after clientTimeout.
func TLSHTTPClient(cfg *tls.Config, http1 bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: cfg, Protocols: new(http.Protocols)}
	if http1 {
		tr.Protocols.SetHTTP1(true)
	} else {
		tr.Protocols.SetHTTP2(true)
	}
	return &http.Client{Transport: tr, Timeout: clientTimeout}
}
