package security

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"go.uber.org/zap"
)

// ServerConfig returns the client API's TLS config: TLS 1.2 or later, the
// Reloader's current certificate, ALPN "h2" and "http/1.1" (Connect, gRPC and
// gRPC-Web on one port). With clientCertAuth every client must present a
// certificate signed by the trusted CA (tls.RequireAndVerifyClientCert, etcd's
// --client-cert-auth); without it a certificate is verified if one is given.
// The CA pool is read at every handshake (GetConfigForClient), so a reloaded
// bundle applies to new connections; so is the revocation list
// (client_crl_file): a client certificate it names is refused at the
// handshake (etcd's --client-crl-file).
func ServerConfig(r *Reloader, clientCertAuth bool) *tls.Config {
	base := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: r.GetCertificate,
	}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := &tls.Config{
			MinVersion:     tls.VersionTLS12,
			NextProtos:     []string{"h2", "http/1.1"},
			GetCertificate: r.GetCertificate,
			ClientCAs:      r.Pool(),
			// Called after the chain verified, only when a certificate was
			// presented (a client without one is governed by ClientAuth).
			VerifyConnection: r.CheckRevoked,
		}
		switch {
		case clientCertAuth:
			c.ClientAuth = tls.RequireAndVerifyClientCert
		case c.ClientCAs != nil:
			c.ClientAuth = tls.VerifyClientCertIfGiven
		}
		return c, nil
	}
	return base
}

// PeerConfig returns the TLS config of peer traffic (backends.Config.PeerTLS),
// used both to accept and to dial: TLS 1.3 only, this node's current
// certificate on both sides (reloaded), the other side's certificate
// required and verified against the peer CA (ClientCAs and RootCAs;
// RequireAndVerifyClientCert: etcd --peer-client-cert-auth, Consul
// verify_incoming). On top of crypto/tls's chain check, VerifyConnection
// requires the other side's certificate to be valid for both server and
// client use, as `ticketctl cert create-node` makes it and client
// certificates are not, so one CA can serve clients and peers without a
// client certificate opening the Raft port, and refuses a certificate that
// the current peer revocation list names (peer_crl_file, reloaded; etcd's
// --peer-crl-file), on both sides: a node neither accepts nor dials a
// revoked peer. A refused peer is logged on log (may be nil). The CA pool
// is read once: a new peer CA takes a restart.
func PeerConfig(r *Reloader, log *zap.Logger) *tls.Config {
	if log == nil {
		log = zap.NewNop()
	}
	pool := r.Pool()
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		GetCertificate:       r.GetCertificate,
		GetClientCertificate: r.GetClientCertificate,
		ClientCAs:            pool,
		RootCAs:              pool,
		ClientAuth:           tls.RequireAndVerifyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			err := verifyPeerUsage(cs)
			if err == nil {
				err = r.CheckRevoked(cs)
			}
			if err != nil {
				log.Warn("peer refused at TLS handshake", zap.Error(err))
			}
			return err
		},
	}
}

// DialMember returns a copy of c, a client TLS config, that also requires
// the server to present a node certificate (valid for server and client
// use) whose CN is id, after c's own checks: the member a node means to
// reach, as a node dialling a member's raft address requires
// (docs/security.md#peer-identity-is-membership). Another member's
// certificate that is valid for the address is refused, so one member
// cannot answer for another; so is a certificate that the current
// revocation list of any of lists names (nil ones are skipped), as the
// peer port refuses it both ways: a stolen key of the member, revoked,
// cannot answer as that member. Errors wrap ErrPeerRefused or ErrRevoked.
func DialMember(c *tls.Config, id string, lists ...*Reloader) *tls.Config {
	out := c.Clone()
	prev := out.VerifyConnection
	out.VerifyConnection = func(cs tls.ConnectionState) error {
		if prev != nil {
			if err := prev(cs); err != nil {
				return err
			}
		}
		if err := verifyPeerUsage(cs); err != nil {
			return err
		}
		if cn := cs.PeerCertificates[0].Subject.CommonName; cn != id {
			return fmt.Errorf("%w: presented a certificate for %q, not %q", ErrPeerRefused, cn, id)
		}
		for _, l := range lists {
			if l == nil {
				continue
			}
			if err := l.CheckRevoked(cs); err != nil {
				return err
			}
		}
		return nil
	}
	return out
}

// verifyPeerUsage checks that the other side's (already verified)
// certificate allows both server and client authentication. Errors wrap
// ErrPeerRefused.
func verifyPeerUsage(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%w: no certificate", ErrPeerRefused)
	}
	leaf := cs.PeerCertificates[0]
	server, client := false, false
	// Both usages must be named: a certificate with the catch-all
	// ExtKeyUsageAny (which some CAs put on client certificates) is not taken
	// for a node's, since a node certificate may assert other principals.
	for _, u := range leaf.ExtKeyUsage {
		server = server || u == x509.ExtKeyUsageServerAuth
		client = client || u == x509.ExtKeyUsageClientAuth
	}
	if !server || !client {
		return fmt.Errorf("%w: %q is not a node certificate (needs server and client auth)", ErrPeerRefused, leaf.Subject.CommonName)
	}
	return nil
}

// ClientConfig returns a dialer's TLS config: server certificates verified
// against roots (the system roots when nil), and cert presented as a client
// certificate when not nil. Host names are verified against the dialed address.
func ClientConfig(roots *x509.CertPool, cert func(*tls.CertificateRequestInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		RootCAs:              roots,
		GetClientCertificate: cert,
	}
}

// LoadClientConfig builds ClientConfig from PEM files as ticketctl's
// --cacert, --cert and --key name them: caFile may be empty (system roots);
// certFile and keyFile go together. Errors: ErrNoCA, ErrNoCertificate, the
// file system's.
func LoadClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	var roots *x509.CertPool
	if caFile != "" {
		p, err := LoadCAPool(caFile)
		if err != nil {
			return nil, err
		}
		roots = p
	}
	c := ClientConfig(roots, nil)
	if certFile != "" || keyFile != "" {
		kp, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %s, %s: %v", ErrNoCertificate, certFile, keyFile, err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c, nil
}
