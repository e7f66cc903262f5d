package security_test

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/security"
)

func TestCertToolingFilesAndModes(t *testing.T) {
	old := syscall.Umask(0) // the modes must not depend on the umask
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "certs")

	ca, err := security.CreateCA(dir, time.Hour, false)
	require.NoError(t, err)
	node, err := security.CreateNode(dir, "n1", []string{"127.0.0.1", "localhost"}, time.Hour, false)
	require.NoError(t, err)
	client, err := security.CreateClient(dir, "orders-svc", time.Hour, false)
	require.NoError(t, err)
	_, err = security.CreateNode(dir, "", []string{"127.0.0.1"}, time.Hour, false)
	require.ErrorIs(t, err, security.ErrWrongNode, "one certificate per node: no shared node certificate")

	modes := map[string]os.FileMode{
		"ca.crt": 0o644, "ca.key": 0o600,
		"node-n1.crt": 0o644, "node-n1.key": 0o600,
		"client.orders-svc.crt": 0o644, "client.orders-svc.key": 0o600,
	}
	for name, want := range modes {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err, name)
		assert.Equal(t, want, fi.Mode().Perm(), name)
	}
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "certs dir")

	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	_, err = node.Cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.NoError(t, err, "node certificate serves 127.0.0.1")
	_, err = node.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err, "node certificate is also a client certificate (peers dial each other)")
	assert.Equal(t, "n1", node.Cert.Subject.CommonName)
	assert.Equal(t, "orders-svc", client.Cert.Subject.CommonName, "CN is the principal")
	_, err = client.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.Error(t, err, "a client certificate cannot serve")

	_, err = security.CreateCA(dir, time.Hour, false)
	require.ErrorIs(t, err, security.ErrExists, "an existing CA is never replaced silently")
	_, err = security.CreateCA(dir, time.Hour, true)
	require.NoError(t, err)
}

func TestExposure(t *testing.T) {
	tests := []struct {
		name     string
		insecure bool
		ep       security.Endpoint
		refused  bool
	}{
		{"loopback_plaintext", false, security.Endpoint{Name: "api_addr", Addr: "127.0.0.1:7001"}, false},
		{"loopback_v6_plaintext", false, security.Endpoint{Name: "api_addr", Addr: "[::1]:7001"}, false},
		{"localhost_plaintext", false, security.Endpoint{Name: "api_addr", Addr: "localhost:7001"}, false},
		{"public_plaintext", false, security.Endpoint{Name: "api_addr", Addr: "10.0.0.5:7001"}, true},
		{"all_interfaces_plaintext", false, security.Endpoint{Name: "raft_addr", Addr: "0.0.0.0:7101"}, true},
		{"empty_host_plaintext", false, security.Endpoint{Name: "raft_addr", Addr: ":7101"}, true},
		{"dns_name_plaintext", false, security.Endpoint{Name: "api_addr", Addr: "n1.example.com:7001"}, true},
		{"public_tls", false, security.Endpoint{Name: "api_addr", Addr: "10.0.0.5:7001", TLS: true}, false},
		{"public_plaintext_insecure", true, security.Endpoint{Name: "api_addr", Addr: "10.0.0.5:7001"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := security.CheckExposure(tt.insecure, tt.ep)
			if !tt.refused {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, security.ErrInsecureExposure)
			assert.Contains(t, err.Error(), tt.ep.Name)
			assert.Contains(t, err.Error(), "--insecure")
		})
	}
}
