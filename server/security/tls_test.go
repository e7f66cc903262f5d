package security_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/security"
)

// pki is a CA with a node certificate for 127.0.0.1 written to dir.
type pki struct {
	dir  string
	ca   *security.KeyPair
	node *security.KeyPair
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	ca, err := security.CreateCA(dir, time.Hour, false)
	require.NoError(t, err)
	node, err := security.CreateNode(dir, "n1", []string{"127.0.0.1"}, time.Hour, false)
	require.NoError(t, err)
	return pki{dir: dir, ca: ca, node: node}
}

func (p pki) files(clientAuth bool) config.TLSFiles {
	return config.TLSFiles{
		CertFile: filepath.Join(p.dir, "node-n1.crt"), KeyFile: filepath.Join(p.dir, "node-n1.key"),
		TrustedCAFile: filepath.Join(p.dir, "ca.crt"), ClientCertAuth: clientAuth,
	}
}

func (p pki) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	return pool
}

// serveTLS accepts TLS connections with cfg on loopback; each completed
// handshake gets "ok\n" written back. It returns the address.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				if err := c.(*tls.Conn).Handshake(); err != nil {
					return
				}
				_, _ = c.Write([]byte("ok\n"))
			}()
		}
	}()
	return ln.Addr().String()
}

// talk dials addr with cfg and reads the server's line: an error means the
// handshake (or the server's verification of us, TLS 1.3) failed.
func talk(addr string, cfg *tls.Config) (*tls.ConnectionState, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		return nil, err
	}
	st := c.ConnectionState()
	return &st, nil
}

func TestServerConfigRefusals(t *testing.T) {
	p := newPKI(t)
	r, err := security.NewReloader(p.files(true), nil)
	require.NoError(t, err)
	addr := serveTLS(t, security.ServerConfig(r, true))

	client, err := p.ca.Issue(security.CertOptions{CommonName: "orders-svc", Client: true})
	require.NoError(t, err)
	other, err := security.NewCA("other CA", time.Hour)
	require.NoError(t, err)
	foreign, err := other.Issue(security.CertOptions{CommonName: "orders-svc", Client: true})
	require.NoError(t, err)
	expired, err := p.ca.Issue(security.CertOptions{CommonName: "orders-svc", Client: true,
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	otherPool := x509.NewCertPool()
	otherPool.AddCert(other.Cert)

	tests := []struct {
		name   string
		roots  *x509.CertPool
		cert   *security.KeyPair
		accept bool
	}{
		{"valid_client_cert", p.pool(), client, true},
		{"no_client_cert", p.pool(), nil, false},
		{"client_cert_from_other_ca", p.pool(), foreign, false},
		{"expired_client_cert", p.pool(), expired, false},
		{"server_from_unknown_ca", otherPool, client, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &tls.Config{RootCAs: tt.roots, ServerName: "127.0.0.1"}
			if tt.cert != nil {
				cfg.Certificates = []tls.Certificate{tt.cert.TLS()}
			}
			st, err := talk(addr, cfg)
			if tt.accept {
				require.NoError(t, err)
				assert.Equal(t, "n1", st.PeerCertificates[0].Subject.CommonName)
				return
			}
			require.Error(t, err)
		})
	}

	t.Run("plaintext_to_tls_port", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		require.NoError(t, err)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		line, _ := bufio.NewReader(c).ReadString('\n')
		assert.NotEqual(t, "ok\n", line)
	})
}

func TestReloadServesRenewedCertificate(t *testing.T) {
	p := newPKI(t)
	r, err := security.NewReloader(p.files(false), nil)
	require.NoError(t, err)
	addr := serveTLS(t, security.ServerConfig(r, false))
	cfg := &tls.Config{RootCAs: p.pool(), ServerName: "127.0.0.1"}

	st, err := talk(addr, cfg)
	require.NoError(t, err)
	assert.Equal(t, p.node.Cert.SerialNumber, st.PeerCertificates[0].SerialNumber)
	assert.False(t, r.Changed())

	renewed, err := security.CreateNode(p.dir, "n1", []string{"127.0.0.1"}, time.Hour, true)
	require.NoError(t, err)
	require.NoError(t, r.Reload())
	st, err = talk(addr, cfg)
	require.NoError(t, err)
	assert.Equal(t, renewed.Cert.SerialNumber, st.PeerCertificates[0].SerialNumber, "the renewed certificate is served without a restart")

	// A broken file is refused and the previous certificate stays in use.
	require.NoError(t, security.WriteFileForTest(p.files(false).CertFile, []byte("garbage")))
	require.ErrorIs(t, r.Reload(), security.ErrNoCertificate)
	st, err = talk(addr, cfg)
	require.NoError(t, err)
	assert.Equal(t, renewed.Cert.SerialNumber, st.PeerCertificates[0].SerialNumber)
}

func TestPeerConfigMutualTLS13(t *testing.T) {
	p := newPKI(t)
	r, err := security.NewReloader(p.files(true), nil)
	require.NoError(t, err)
	addr := serveTLS(t, security.PeerConfig(r, nil))

	peer2, err := p.ca.Issue(security.CertOptions{CommonName: "n2", Hosts: []string{"127.0.0.1"}, Server: true, Client: true})
	require.NoError(t, err)
	client, err := p.ca.Issue(security.CertOptions{CommonName: "orders-svc", Client: true})
	require.NoError(t, err)
	other, err := security.NewCA("other CA", time.Hour)
	require.NoError(t, err)
	foreign, err := other.Issue(security.CertOptions{CommonName: "n9", Hosts: []string{"127.0.0.1"}, Server: true, Client: true})
	require.NoError(t, err)

	tests := []struct {
		name   string
		cert   *security.KeyPair
		max    uint16
		accept bool
	}{
		{"node_cert_same_ca", peer2, 0, true},
		{"no_cert", nil, 0, false},
		{"node_cert_other_ca", foreign, 0, false},
		{"client_cert_same_ca", client, 0, false},
		{"tls12_only", peer2, tls.VersionTLS12, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &tls.Config{RootCAs: p.pool(), ServerName: "127.0.0.1", MaxVersion: tt.max}
			if tt.cert != nil {
				cfg.Certificates = []tls.Certificate{tt.cert.TLS()}
			}
			st, err := talk(addr, cfg)
			if tt.accept {
				require.NoError(t, err)
				assert.Equal(t, uint16(tls.VersionTLS13), st.Version)
				return
			}
			require.Error(t, err)
		})
	}

	t.Run("dialer_refuses_server_from_other_ca", func(t *testing.T) {
		fr, err := foreignReloader(t, other, foreign)
		require.NoError(t, err)
		evil := serveTLS(t, security.PeerConfig(fr, nil))
		dial := security.PeerConfig(r, nil).Clone()
		dial.ServerName = "127.0.0.1"
		_, err = talk(evil, dial)
		require.Error(t, err)
	})
}

// foreignReloader writes kp (signed by ca) and ca to a directory and loads them.
func foreignReloader(t *testing.T, ca, kp *security.KeyPair) (*security.Reloader, error) {
	dir := t.TempDir()
	require.NoError(t, ca.WriteFiles(dir, "ca.crt", "ca.key", false))
	require.NoError(t, kp.WriteFiles(dir, "n.crt", "n.key", false))
	return security.NewReloader(config.TLSFiles{CertFile: filepath.Join(dir, "n.crt"), KeyFile: filepath.Join(dir, "n.key"), TrustedCAFile: filepath.Join(dir, "ca.crt")}, nil)
}
