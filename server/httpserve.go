package server

import (
	"errors"
	"net"
	"net/http"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/console"
)

// newHTTPServer builds the client API's http.Server: the handler, the
// protocols (h2c, or HTTP/1.1 and HTTP/2 over TLS when the node has a
// certificate) and the limits that protect the node from slow or idle
// clients (limits.go).
func (n *Node) newHTTPServer(reg *prometheus.Registry) *http.Server {
	s := &http.Server{
		Handler:  n.handler(reg),
		ErrorLog: zap.NewStdLog(n.log.Named("http")),
	}
	n.sec.configure(s)
	return s
}

// protocols is HTTP/1.1 plus unencrypted HTTP/2 (h2c with prior knowledge),
// so Connect, gRPC and gRPC-Web clients share one port without TLS.
func protocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &p
}

// tlsProtocols is HTTP/1.1 and HTTP/2 over TLS, chosen by ALPN.
func tlsProtocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	return &p
}

// handler builds the HTTP handler: both services, health, reflection and,
// unless it has its own listener (listen_metrics_addr), /metrics; wrapped in
// CORS when origins are allowed and in the request-body read timeout, and
// the unary calls served on the node's workers (workerpool.go).
func (n *Node) handler(reg *prometheus.Registry) http.Handler {
	opts := []connect.HandlerOption{
		connect.WithInterceptors(n.met.interceptor(), loggingInterceptor(n.log.Named("rpc")), n.sec.auth.Interceptor()),
		connect.WithRecover(n.recoverPanic),
		// Replies are tens of bytes: gzip would cost more CPU than it saves.
		connect.WithCompressMinBytes(compressMinBytes),
		connect.WithReadMaxBytes(maxRequestBytes),
	}
	mux := http.NewServeMux()
	mux.Handle(ticketv1connect.NewLockServiceHandler(&lockService{n: n}, opts...))
	mux.Handle(ticketv1connect.NewClusterServiceHandler(&clusterService{n: n}, opts...))
	mux.Handle(grpchealth.NewHandler(n.health, opts...))
	reflector := grpcreflect.NewStaticReflector(
		ticketv1connect.LockServiceName,
		ticketv1connect.ClusterServiceName,
		grpchealth.HealthV1ServiceName,
	)
	mux.Handle(grpcreflect.NewHandlerV1(reflector, opts...))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, opts...))
	mux.Handle(console.Path, console.Handler()) // the web console at /ui/
	mux.HandleFunc(LivezPath, n.livez)          // probes.go
	mux.HandleFunc(ReadyzPath, n.readyz)        // probes.go
	n.sec.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	if n.cfg.ListenMetricsAddr == "" {
		mux.Handle("/metrics", n.sec.metrics)
	}
	return n.workers.wrap(n.sec.wrap(withHints(mux))) // hints.go
}

// MetricsHandler serves the node's Prometheus metrics (its registry, see
// WithRegistry) at any path; `ticketd serve` mounts it on its own listener
// when listen_metrics_addr is set, and the API port then has no /metrics.
func (n *Node) MetricsHandler() http.Handler { return n.sec.metrics }

// Handler returns the node's HTTP handler (the API, health, reflection and
// /metrics), for callers that run their own http.Server.
func (n *Node) Handler() http.Handler { return n.server.Handler }

// Serve accepts API connections on l until Close: plaintext h2c, or TLS
// (HTTP/2 by ALPN and HTTP/1.1) when the node has a certificate (cert_file).
// Open connections are capped (limits.max_connections): a connection beyond
// the cap takes the slot of the oldest idle one (or of one silent past its
// grace), else it is refused (closed); see connLimiter. It returns
// http.ErrServerClosed after Close. Only one Serve call is allowed.
func (n *Node) Serve(l net.Listener) error {
	if !n.served.CompareAndSwap(false, true) {
		return errors.New("ticketd: Serve called twice")
	}
	l = n.sec.limitListener(l)
	if n.server.TLSConfig != nil {
		return n.server.ServeTLS(l, "", "")
	}
	return n.server.Serve(l)
}
