package httpapi

import (
	"errors"
	"net"
	"net/http"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/security"
)

// The metrics listener (listen_metrics_addr; etcd's --listen-metrics-urls)
// serves /metrics, /livez and /readyz apart from the client API, and never
// asks for a client certificate: with client_cert_auth on the API port, a
// load balancer's health check and a Prometheus scrape have no certificate
// to present, and neither endpoint returns anything a client could misuse
// (docs/security.md#probes-and-metrics). It is plain HTTP, or TLS with its
// own certificate (metrics_cert_file), reloaded like the others.

// metricsListener is the server of the metrics listener.
type metricsListener struct {
	srv    *http.Server
	served atomic.Bool
}

// newMetricsListener builds the metrics listener's server: the node's
// /metrics, /livez and /readyz with the API's header and idle timeouts and
// header bound, TLS 1.2+ without client certificates when cert is not nil.
func (s *Server) newMetricsListener(cert *security.Reloader, l config.Limits, log *zap.Logger) *metricsListener {
	mux := http.NewServeMux()
	mux.Handle("/metrics", s.metricsHandler)
	mux.HandleFunc(LivezPath, s.livez)   // probes.go
	mux.HandleFunc(ReadyzPath, s.readyz) // probes.go
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: ms(l.ReadHeaderTimeoutMS),
		IdleTimeout:       ms(l.IdleTimeoutMS),
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ErrorLog:          zap.NewStdLog(log),
	}
	if cert != nil {
		srv.TLSConfig = security.ServerConfig(cert, false)
	}
	return &metricsListener{srv: srv}
}

// ServeMetrics serves /metrics, /livez and /readyz on l, without client
// certificates, until Close: plain HTTP, or TLS when metrics_cert_file is
// set. With listen_metrics_addr set, /metrics is served here and no longer
// on the API port (the probes stay on both). It returns
// http.ErrServerClosed after Close. Only one ServeMetrics call is allowed.
func (s *Server) ServeMetrics(l net.Listener) error {
	m := s.metrics
	if !m.served.CompareAndSwap(false, true) {
		return errors.New("ticketd: ServeMetrics called twice")
	}
	if m.srv.TLSConfig != nil {
		return m.srv.ServeTLS(l, "", "")
	}
	return m.srv.Serve(l)
}

// MetricsTLS reports whether ServeMetrics serves TLS (metrics_cert_file).
func (s *Server) MetricsTLS() bool { return s.metrics.srv.TLSConfig != nil }
