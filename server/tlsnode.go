package server

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/server/forward"
	"github.com/ticketd/ticketd/server/security"
)

// nodeSecurity is a node's transport security and connection limits: the
// client API's and peers' certificates (reloaded until the node closes), the
// connection cap, CORS and the request-body timeout
// (docs/security.md#transport-security).
type nodeSecurity struct {
	api  *security.Reloader // nil: plaintext h2c API
	peer *security.Reloader // nil: plaintext peer traffic
	// metricsTLS is listen_metrics_addr's certificate (nil: plain HTTP).
	metricsTLS *security.Reloader
	limiter    *connLimiter
	auth       *security.Authenticator // principals and the policy (auth.go)
	origins    []string
	// clientCertAuth requires client certificates on the API.
	clientCertAuth bool
	body           time.Duration
	metrics        http.Handler // the node's /metrics
	limits         httpLimits
}

// httpLimits are the http.Server's own bounds.
type httpLimits struct {
	readHeader, idle time.Duration
	maxHeaderBytes   int
	maxStreams       int
}

// secure loads the node's certificates, refuses insecure exposure
// (security.CheckExposure), and fills the backend config with the peer TLS
// config, the peer message bound and the fail-stop hook. It also switches
// forwarding to TLS when the API serves TLS. Certificates are watched for
// change (and SIGHUP) until the node closes.
func (n *Node) secure(b *backends.Config) error {
	cfg := n.cfg
	l := cfg.Limits
	s := &nodeSecurity{
		limiter:        newConnLimiter(l.MaxConnections, time.Duration(l.ReadHeaderTimeoutMS)*time.Millisecond),
		origins:        cfg.CORSAllowedOrigins,
		clientCertAuth: cfg.ClientCertAuth,
		body:           time.Duration(l.BodyReadTimeoutMS) * time.Millisecond,
		limits: httpLimits{
			readHeader:     time.Duration(l.ReadHeaderTimeoutMS) * time.Millisecond,
			idle:           time.Duration(l.IdleTimeoutMS) * time.Millisecond,
			maxHeaderBytes: l.MaxHeaderBytes,
			maxStreams:     l.MaxConcurrentStreams,
		},
	}
	err := security.CheckExposure(cfg.Insecure,
		security.Endpoint{Name: "api_addr", Addr: cfg.APIAddr, TLS: cfg.ClientTLS().Enabled()},
		security.Endpoint{Name: "raft_addr", Addr: cfg.RaftAddr, TLS: cfg.PeerTLS().Enabled()},
	)
	if err != nil {
		return err
	}
	log := n.log.Named("security")
	if files := cfg.ClientTLS(); files.Enabled() {
		if s.api, err = security.NewReloader(files, log); err != nil {
			return err
		}
		go s.api.Watch(n.life, security.DefaultPollInterval)
	}
	if files := cfg.PeerTLS(); files.Enabled() {
		if s.peer, err = security.NewReloader(files, log); err != nil {
			return err
		}
		go s.peer.Watch(n.life, security.DefaultPollInterval)
		b.PeerTLS = security.PeerConfig(s.peer, log)
	}
	if files := cfg.MetricsTLS(); files.Enabled() {
		if s.metricsTLS, err = security.NewReloader(files, log); err != nil {
			return err
		}
		go s.metricsTLS.Watch(n.life, security.DefaultPollInterval)
	}
	if s.auth, err = n.newAuthenticator(); err != nil {
		return err
	}
	b.MaxMessageBytes = cfg.Raft.MaxMessageBytes
	b.OnFatal = n.onFatal
	n.sec = s
	if s.api != nil {
		fc := n.fwd.Config()
		fc.TLS, err = s.forwardTLS(cfg.TrustedCAFile, cfg.PeerTrustedCAFile)
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
// API certificate is presented as its client certificate.
func (s *nodeSecurity) forwardTLS(caFiles ...string) (*tls.Config, error) {
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
	return security.ClientConfig(roots, s.api.GetClientCertificate), nil
}

// configure sets srv's protocols, TLS config and limits.
func (s *nodeSecurity) configure(srv *http.Server) {
	srv.Protocols = protocols()
	if s.api != nil {
		srv.Protocols = tlsProtocols()
		srv.TLSConfig = security.ServerConfig(s.api, s.clientCertAuth)
	}
	srv.ReadHeaderTimeout = s.limits.readHeader
	srv.IdleTimeout = s.limits.idle
	srv.MaxHeaderBytes = s.limits.maxHeaderBytes
	srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: s.limits.maxStreams}
	srv.ConnState = s.limiter.connState
}

// wrap adds CORS, the caller's identity and the request-body timeout
// around the API handler.
func (s *nodeSecurity) wrap(h http.Handler) http.Handler {
	return withCORS(s.origins, withCaller(withBodyTimeout(s.body, h)))
}

// limitListener applies the connection cap to l.
func (s *nodeSecurity) limitListener(l net.Listener) net.Listener {
	return s.limiter.listener(l)
}
