//go:build linux

package hosts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// certAuthority issues the certificates of a TLS cluster, made in the
// test with crypto/x509 (as crypto/tls's own tests and
// httptest.NewTLSServer do): one CA, one certificate per node start (its
// current address as IP SAN, server and client use, so the same pair
// serves the API and mutual TLS between peers), and one client
// certificate for the test process.
type certAuthority struct {
	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	caFile string

	mu     sync.Mutex // serial
	serial int64
}

// newCA creates a CA valid for a day and writes ca.crt into dir.
func newCA(dir string) (*certAuthority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("hosts: ca key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "ticketd hosts test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("hosts: ca certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("hosts: ca certificate: %w", err)
	}
	ca := &certAuthority{dir: dir, cert: cert, key: key, caFile: filepath.Join(dir, "ca.crt"), serial: 1}
	return ca, writePEM(ca.caFile, "CERTIFICATE", der)
}

// issue makes a certificate for name (its CN) with the given IP SANs, for
// server and client use, and writes name.crt and name.key into the CA's
// directory (replacing earlier ones: ticketd reloads them). Safe for
// concurrent use with different names.
func (ca *certAuthority) issue(name string, ips ...net.IP) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("hosts: key of %s: %w", name, err)
	}
	ca.mu.Lock()
	ca.serial++
	serial := ca.serial
	ca.mu.Unlock()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return "", "", fmt.Errorf("hosts: certificate of %s: %w", name, err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", fmt.Errorf("hosts: key of %s: %w", name, err)
	}
	certFile, keyFile = filepath.Join(ca.dir, name+".crt"), filepath.Join(ca.dir, name+".key")
	if err := writePEM(keyFile, "PRIVATE KEY", kb); err != nil {
		return "", "", err
	}
	return certFile, keyFile, writePEM(certFile, "CERTIFICATE", der)
}

// clientConfig returns the TLS configuration of the test's clients: the
// CA as root, a client certificate, TLS 1.3.
func (ca *certAuthority) clientConfig() (*tls.Config, error) {
	certFile, keyFile, err := ca.issue("hosts-test-client")
	if err != nil {
		return nil, err
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("hosts: client certificate: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}, nil
}

// writePEM writes one PEM block to path atomically (write, then rename).
func writePEM(path, typ string, der []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("hosts: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("hosts: write %s: %w", path, err)
	}
	return nil
}
