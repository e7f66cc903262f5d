package server

import (
	"net"
	"net/http"
)

// This file is the Node's serving API, handed to its HTTP side (package
// httpapi): the client API's listener, the metrics listener and their
// handlers.

// Serve accepts API connections on l until Close: plaintext h2c, or TLS
// (HTTP/2 by ALPN and HTTP/1.1) when the node has a certificate (cert_file).
// Open connections are capped (limits.max_connections): a connection beyond
// the cap takes the slot of the oldest idle one (or of one silent past its
// grace), else it is refused (closed). It returns http.ErrServerClosed
// after Close. Only one Serve call is allowed.
func (n *Node) Serve(l net.Listener) error { return n.http.Serve(l) }

// ServeMetrics serves /metrics, /livez and /readyz on l, without client
// certificates, until Close: plain HTTP, or TLS when metrics_cert_file is
// set. `ticketd serve` runs it on listen_metrics_addr; with that address
// set, /metrics is served here and no longer on the API port (the probes
// stay on both). It returns http.ErrServerClosed after Close. Only one
// ServeMetrics call is allowed.
func (n *Node) ServeMetrics(l net.Listener) error { return n.http.ServeMetrics(l) }

// MetricsTLS reports whether ServeMetrics serves TLS (metrics_cert_file).
func (n *Node) MetricsTLS() bool { return n.http.MetricsTLS() }

// MetricsHandler serves the node's Prometheus metrics (its registry, see
// WithRegistry) at any path; `ticketd serve` mounts it on its own listener
// when listen_metrics_addr is set, and the API port then has no /metrics.
func (n *Node) MetricsHandler() http.Handler { return n.http.MetricsHandler() }

// Handler returns the node's HTTP handler (the API, health, reflection and
// /metrics), for callers that run their own http.Server.
func (n *Node) Handler() http.Handler { return n.http.Handler() }
