package backends

import (
	"crypto/tls"
	"fmt"
)

// validatePeerTLS checks that a non-nil PeerTLS can do mutual TLS: a
// certificate to present, a CA pool to verify the other side with, and client
// certificates required and verified.
func validatePeerTLS(c *tls.Config) error {
	if c == nil {
		return nil
	}
	switch {
	case len(c.Certificates) == 0 && c.GetCertificate == nil:
		return fmt.Errorf("%w: PeerTLS has no certificate", ErrInvalidConfig)
	case c.ClientCAs == nil:
		return fmt.Errorf("%w: PeerTLS has no ClientCAs (peer CA pool)", ErrInvalidConfig)
	case c.RootCAs == nil:
		return fmt.Errorf("%w: PeerTLS has no RootCAs (peer CA pool)", ErrInvalidConfig)
	case c.ClientAuth != tls.RequireAndVerifyClientCert:
		return fmt.Errorf("%w: PeerTLS.ClientAuth must be RequireAndVerifyClientCert", ErrInvalidConfig)
	case c.InsecureSkipVerify:
		return fmt.Errorf("%w: PeerTLS.InsecureSkipVerify must be false", ErrInvalidConfig)
	}
	return nil
}

// PeerServerTLS returns the TLS config a backend accepts peer connections
// with: a clone of c with MinVersion TLS 1.3 and client certificates required
// and verified against c.ClientCAs. Nil in, nil out. Safe for concurrent use;
// c is not modified.
func PeerServerTLS(c *tls.Config) *tls.Config {
	if c == nil {
		return nil
	}
	s := c.Clone()
	s.MinVersion = tls.VersionTLS13
	s.ClientAuth = tls.RequireAndVerifyClientCert
	return s
}

// PeerClientTLS returns the TLS config a backend dials the peer at host
// (no port) with: a clone of c with MinVersion TLS 1.3, ServerName set to
// host, and the server's certificate verified against c.RootCAs. The node's
// own certificate (c.Certificates or c.GetClientCertificate) is presented as
// the client certificate. Nil in, nil out; c is not modified.
func PeerClientTLS(c *tls.Config, host string) *tls.Config {
	if c == nil {
		return nil
	}
	d := c.Clone()
	d.MinVersion = tls.VersionTLS13
	d.ServerName = host
	d.ClientCAs = nil
	d.ClientAuth = tls.NoClientCert
	if d.GetClientCertificate == nil && len(d.Certificates) == 0 && c.GetCertificate != nil {
		get := c.GetCertificate
		d.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return get(&tls.ClientHelloInfo{ServerName: host})
		}
	}
	d.GetCertificate = nil
	return d
}
