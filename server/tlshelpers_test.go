package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/memraft"
	"github.com/ticketd/ticketd/server/security"
)

// testPKI is a CA in a temp dir with a node certificate for 127.0.0.1
// (node-n1.*) and a client certificate (client.orders-svc.*).
type testPKI struct {
	dir    string
	ca     *security.KeyPair
	client *security.KeyPair
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	ca, err := security.CreateCA(dir, time.Hour, false)
	require.NoError(t, err)
	_, err = security.CreateNode(dir, "n1", []string{"127.0.0.1", "localhost"}, time.Hour, false)
	require.NoError(t, err)
	client, err := security.CreateClient(dir, "orders-svc", time.Hour, false)
	require.NoError(t, err)
	return testPKI{dir: dir, ca: ca, client: client}
}

func (p testPKI) path(name string) string { return filepath.Join(p.dir, name) }

func (p testPKI) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	return pool
}

// clientTLS trusts the CA and presents the client certificate when withCert.
func (p testPKI) clientTLS(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: p.pool()}
	if withCert {
		c.Certificates = []tls.Certificate{p.client.TLS()}
	}
	return c
}

// secureConfig turns on client TLS with client-cert auth on c.
func (p testPKI) secureConfig(c *config.Config) {
	c.CertFile, c.KeyFile = p.path("node-n1.crt"), p.path("node-n1.key")
	c.TrustedCAFile, c.ClientCertAuth = p.path("ca.crt"), true
}

// tlsHTTPClient speaks HTTP/2 (ALPN) or, with http1, HTTP/1.1 over TLS.
func tlsHTTPClient(cfg *tls.Config, http1 bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: cfg, Protocols: new(http.Protocols)}
	if http1 {
		tr.Protocols.SetHTTP1(true)
	} else {
		tr.Protocols.SetHTTP2(true)
	}
	return &http.Client{Transport: tr, Timeout: safety}
}

// standalone is one node over memraft, served on loopback, without the
// nodetest harness (tests of the transport: TLS, limits, CORS, fail-stop).
type standalone struct {
	node    *server.Node
	addr    string
	backend backends.Config // as the node gave it to its backend
	mem     *memraft.Node
}

// startStandalone starts a one-node cluster over memraft with cfg edited by edit.
func startStandalone(t *testing.T, edit func(*config.Config)) *standalone {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := config.DefaultConfig()
	cfg.APIAddr = ln.Addr().String()
	cfg.RaftAddr = "127.0.0.1:1" // memraft has no peer port
	cfg.DataDir = t.TempDir()
	if edit != nil {
		edit(&cfg)
	}
	s := &standalone{addr: cfg.APIAddr}
	s.node, err = server.New(cfg, server.WithBackend(func(bc backends.Config) (server.Backend, error) {
		s.backend = bc
		n, err := memraft.New(bc)
		s.mem = n
		return n, err
	}))
	if err != nil {
		_ = ln.Close()
		require.NoError(t, err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.node.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), safety)
		defer cancel()
		_ = s.node.Close(ctx)
		<-done
	})
	return s
}
