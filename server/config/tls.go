package config

import "fmt"

// TLSFiles names the PEM files of one TLS endpoint (the client API or the
// peer transport) as configured.
type TLSFiles struct {
	// CertFile and KeyFile are this node's certificate and private key.
	CertFile, KeyFile string
	// TrustedCAFile is the CA bundle the other side's certificate is verified against.
	TrustedCAFile string
	// ClientCertAuth requires the other side to present a certificate (always
	// true for peers: mutual TLS).
	ClientCertAuth bool
	// CommonName, when set, is the subject CN CertFile must carry: for
	// peers, this node's id (peer identity is membership, so every node
	// has a certificate of its own; docs/security.md).
	CommonName string
	// CRLFile is the revocation list, signed by a CA of TrustedCAFile, of
	// the other side's certificates ("" : none).
	CRLFile string
}

// Enabled reports whether a certificate is configured (TLS on).
func (f TLSFiles) Enabled() bool { return f.CertFile != "" }

// ClientTLS returns the client API's TLS files (cert_file, key_file,
// trusted_ca_file, client_cert_auth, client_crl_file).
func (c Config) ClientTLS() TLSFiles {
	return TLSFiles{CertFile: c.CertFile, KeyFile: c.KeyFile, TrustedCAFile: c.TrustedCAFile, ClientCertAuth: c.ClientCertAuth, CRLFile: c.ClientCRLFile}
}

// PeerTLS returns the peer transport's TLS files (peer_cert_file,
// peer_key_file, peer_trusted_ca_file, peer_crl_file); peers always
// verify each other, and the certificate must name this node's id.
func (c Config) PeerTLS() TLSFiles {
	return TLSFiles{CertFile: c.PeerCertFile, KeyFile: c.PeerKeyFile, TrustedCAFile: c.PeerTrustedCAFile, ClientCertAuth: true, CommonName: c.ID, CRLFile: c.PeerCRLFile}
}

// validateTLS checks that each TLS endpoint names its files consistently:
// a key with a certificate, a CA for client-cert auth and for peers.
func (c Config) validateTLS() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return bad("cert_file and key_file go together")
	}
	if c.ClientCertAuth && (c.CertFile == "" || c.TrustedCAFile == "") {
		return bad("client_cert_auth needs cert_file, key_file and trusted_ca_file")
	}
	if c.TrustedCAFile != "" && c.CertFile == "" {
		return bad("trusted_ca_file needs cert_file and key_file (TLS on)")
	}
	if c.ClientCRLFile != "" && c.TrustedCAFile == "" {
		return bad("client_crl_file needs trusted_ca_file (the CA that signed it)")
	}
	if c.PeerCRLFile != "" && c.PeerTrustedCAFile == "" {
		return bad("peer_crl_file needs peer_cert_file, peer_key_file and peer_trusted_ca_file")
	}
	if (c.MetricsCertFile == "") != (c.MetricsKeyFile == "") {
		return bad("metrics_cert_file and metrics_key_file go together")
	}
	if c.MetricsCertFile != "" && c.ListenMetricsAddr == "" {
		return bad("metrics_cert_file needs listen_metrics_addr")
	}
	peer := []string{c.PeerCertFile, c.PeerKeyFile, c.PeerTrustedCAFile}
	set := 0
	for _, f := range peer {
		if f != "" {
			set++
		}
	}
	if set != 0 && set != len(peer) {
		return bad("peer_cert_file, peer_key_file and peer_trusted_ca_file go together (mutual TLS)")
	}
	return nil
}

// MetricsTLS returns the TLS files of listen_metrics_addr (metrics_cert_file,
// metrics_key_file): no CA, since that listener never asks for a client
// certificate. Not Enabled: plain HTTP.
func (c Config) MetricsTLS() TLSFiles {
	return TLSFiles{CertFile: c.MetricsCertFile, KeyFile: c.MetricsKeyFile}
}
