// Package httpapi is a ticketd node's HTTP side: it serves the lock
// service's ticket.v1.LockService and ticket.v1.ClusterService with
// connect-go (Connect, gRPC and gRPC-Web on one port, HTTP/1.1 and h2c, or
// HTTP/1.1 and HTTP/2 over TLS), gRPC health and reflection, the web
// console, the /livez and /readyz probes and Prometheus /metrics, and
// protects the node from the clients it serves. It knows nothing of locks:
// the services are given to it (Config.LockService, Config.ClusterService),
// and what only the lock service knows, it asks through Node.
//
// The files follow the concerns:
//   - server.go: Server, New, Close, health (Fail) and what the node reads
//     back (Auth, APICert).
//   - handler.go: what is mounted on the API port and the chain of
//     handlers every request passes.
//   - serve.go: the API's http.Server (protocols, TLS, header and idle
//     limits) and Serve.
//   - connlimit.go: the cap on open connections (limits.max_connections)
//     and which connection makes room for a new one.
//   - bodytimeout.go: the bound on reading a request body
//     (limits.body_read_timeout_ms).
//   - bidistream.go: a client stream's body instead: cut when idle
//     (limits.idle_timeout_ms) or by its handler (CutStream).
//   - streamwrite.go: the bound on writing each message of a stream
//     (limits.stream_write_timeout_ms), and StreamEnding, the bound on
//     what a stream still writes once its handler ends it.
//   - writelimit.go: the bound on writing a whole PeerService answer.
//   - cors.go: browser origins (cors_allowed_origins).
//   - probes.go: /livez and /readyz, Kubernetes style.
//   - hints.go: one-line answers to a call without Content-Type or to a
//     procedure that does not exist; the table of API procedures.
//   - auditcaller.go: who sent a request, as the audit log names it.
//   - metricslisten.go: /metrics and the probes on listen_metrics_addr,
//     without client certificates.
//   - rpclog.go: the log line of every unary call.
//   - workerpool.go: long-lived goroutines for unary calls over HTTP/2 and
//     for the proposals the lock service detaches from its callers.
//
// See docs/security.md#transport-security and
// docs/security.md#probes-and-metrics for what an operator configures,
// and docs/operations.md#health-and-monitoring for the probes.
//
// # Usage
//
// The lock service builds the Server once and hands it its listeners:
//
//	srv, err := httpapi.New(httpapi.Config{
//		Node: node, LockService: locks, ClusterService: cluster,
//		Config: cfg, Metrics: interceptor, Auth: auth, Registry: reg,
//		Workers: httpapi.NewWorkerPool(), Log: log, Life: ctx,
//	})
//	if err != nil {
//		return err
//	}
//	go srv.Serve(apiListener)
//	go srv.ServeMetrics(metricsListener) // with listen_metrics_addr
//	...
//	err = srv.Close(ctx, drain, release)
package httpapi
