package server

import (
	"errors"
	"net"
	"net/http"
	"sync/atomic"

	"go.uber.org/zap"

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
// /metrics, /livez and /readyz with the API's header timeout, TLS 1.2+
// without client certificates when tls is not nil.
func (n *Node) newMetricsListener(tls *security.Reloader) *metricsListener {
	mux := http.NewServeMux()
	mux.Handle("/metrics", n.sec.metrics)
	mux.HandleFunc(LivezPath, n.livez)   // probes.go
	mux.HandleFunc(ReadyzPath, n.readyz) // probes.go
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: n.sec.limits.readHeader,
		IdleTimeout:       n.sec.limits.idle,
		MaxHeaderBytes:    n.sec.limits.maxHeaderBytes,
		ErrorLog:          zap.NewStdLog(n.log.Named("metrics")),
	}
	if tls != nil {
		srv.TLSConfig = security.ServerConfig(tls, false)
	}
	return &metricsListener{srv: srv}
}

// ServeMetrics serves /metrics, /livez and /readyz on l, without client
// certificates, until Close: plain HTTP, or TLS when metrics_cert_file is
// set. `ticketd serve` runs it on listen_metrics_addr; with that address
// set, /metrics is served here and no longer on the API port (the probes
// stay on both). It returns http.ErrServerClosed after Close. Only one
// ServeMetrics call is allowed.
func (n *Node) ServeMetrics(l net.Listener) error {
	m := n.metricsLn
	if !m.served.CompareAndSwap(false, true) {
		return errors.New("ticketd: ServeMetrics called twice")
	}
	if m.srv.TLSConfig != nil {
		return m.srv.ServeTLS(l, "", "")
	}
	return m.srv.Serve(l)
}

// MetricsTLS reports whether ServeMetrics serves TLS (metrics_cert_file).
func (n *Node) MetricsTLS() bool { return n.metricsLn.srv.TLSConfig != nil }
