package server

import (
	"crypto/tls"
	"crypto/x509"
	"os"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/server/forward"
	"github.com/ticketd/ticketd/server/httpapi"
	"github.com/ticketd/ticketd/server/security"
)

// This file wires a node's transport security (docs/security.md#transport-security):
// the refusal of insecure exposure, the HTTP side with the client API's
// certificate (package httpapi), the peers' certificate for the backend,
// and TLS for forwarding to the leader.

// secure refuses insecure exposure (security.CheckExposure), builds the
// HTTP side (n.http: the API's certificates, limits, CORS and the
// Authenticator, auth.go), and fills the backend config with the peer TLS
// config, the peer message bound and the fail-stop hook. It also switches
// forwarding to TLS when the API serves TLS. Certificates are watched for
// change (and SIGHUP) until the node closes.
func (n *Node) secure(b *backends.Config, api httpapi.Config) error {
	cfg := n.cfg
	err := security.CheckExposure(cfg.Insecure,
		security.Endpoint{Name: "api_addr", Addr: cfg.APIAddr, TLS: cfg.ClientTLS().Enabled()},
		security.Endpoint{Name: "raft_addr", Addr: cfg.RaftAddr, TLS: cfg.PeerTLS().Enabled()},
	)
	if err != nil {
		return err
	}
	if api.Auth, err = n.newAuthenticator(); err != nil {
		return err
	}
	if n.http, err = httpapi.New(api); err != nil {
		return err
	}
	if files := cfg.PeerTLS(); files.Enabled() {
		log := n.log.Named("security")
		peer, err := security.NewReloader(files, log)
		if err != nil {
			return err
		}
		go peer.Watch(n.life, security.DefaultPollInterval)
		b.PeerTLS = security.PeerConfig(peer, log)
		n.peerCert = peer
	}
	b.MaxMessageBytes = cfg.Raft.MaxMessageBytes
	b.OnFatal = n.onFatal
	if cert := n.http.APICert(); cert != nil {
		fc := n.fwd.Config()
		fc.TLS, err = forwardTLS(cert, cfg.TrustedCAFile, cfg.PeerTrustedCAFile)
		if err != nil {
			return err
		}
		old := n.fwd
		n.fwd = forward.New(fc)
		old.Close()
	}
	return nil
}

// forwardTLS is the TLS config a follower forwards to the leader's client
// API with: the leader's certificate is verified against the client CA and
// the peer CA (either may have signed node certificates), and this node's
// API certificate (cert) is presented as its client certificate.
func forwardTLS(cert *security.Reloader, caFiles ...string) (*tls.Config, error) {
	var roots *x509.CertPool
	for _, f := range caFiles {
		if f == "" {
			continue
		}
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if roots == nil {
			roots = x509.NewCertPool()
		}
		roots.AppendCertsFromPEM(pem)
	}
	return security.ClientConfig(roots, cert.GetClientCertificate), nil
}
