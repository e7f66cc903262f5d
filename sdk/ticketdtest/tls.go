package ticketdtest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
)

// TLS starts a test cluster with transport security, from certificates the
// test made beforehand in CertsDir with the names `ticketctl cert` uses:
// ca.crt, node-<id>.crt and node-<id>.key for every node (valid for
// 127.0.0.1), and client.<Client>.crt/.key when Client is set.
type TLS struct {
	// CertsDir holds the CA and the certificates.
	CertsDir string
	// ClientCertAuth starts the nodes with --client-cert-auth.
	ClientCertAuth bool
	// Peer turns on peer mutual TLS (--peer-cert-file, ...) with the same CA
	// and node certificates.
	Peer bool
	// Client names the client certificate the cluster's own clients present
	// (client.<Client>.crt); empty: none.
	Client string
}

// flags returns node id's `ticketd serve` TLS flags.
func (o *TLS) flags(id string) []string {
	cert := filepath.Join(o.CertsDir, "node-"+id+".crt")
	key := filepath.Join(o.CertsDir, "node-"+id+".key")
	ca := filepath.Join(o.CertsDir, "ca.crt")
	out := []string{"--cert-file", cert, "--key-file", key, "--trusted-ca-file", ca}
	if o.ClientCertAuth {
		out = append(out, "--client-cert-auth")
	}
	if o.Peer {
		out = append(out, "--peer-cert-file", cert, "--peer-key-file", key, "--peer-trusted-ca-file", ca)
	}
	return out
}

// ClientConfig returns a client TLS config trusting the CA and presenting
// the Client certificate, if any.
func (o *TLS) ClientConfig() (*tls.Config, error) {
	pem, err := os.ReadFile(filepath.Join(o.CertsDir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no CA certificate in %s", o.CertsDir)
	}
	c := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if o.Client != "" {
		base := filepath.Join(o.CertsDir, "client."+o.Client)
		kp, err := tls.LoadX509KeyPair(base+".crt", base+".key")
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c, nil
}

// TLSClient returns an HTTP/2-over-TLS client with cfg.
func TLSClient(cfg *tls.Config) *http.Client {
	var p http.Protocols
	p.SetHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p, TLSClientConfig: cfg}}
}
