// Package server is ticketd's lock service: a Node holds the replicated lock
// table (a core.StateMachine driven by a consensus backend), and serves
// ticket.v1.LockService and ticket.v1.ClusterService with connect-go — the
// Connect, gRPC and gRPC-Web protocols on one port over HTTP/1.1 and h2c —
// plus gRPC health, gRPC reflection and Prometheus /metrics.
//
// On the leader, after its barrier (core.LeaderEvent.IsLeader):
//   - the lessor (package lessor) keeps lease deadlines and proposes
//     Expire{key, token}; renewals are confirmed by a quorum first;
//   - the wait queue (package waitq) gates grants per key and serves waiting
//     Acquire requests first-in first-out;
//   - a grant whose client is gone when it applies is released at once (a
//     ghost lock), and a retry with the same owner waits for that release;
//     only a grant that created its lock can be a ghost, and a retry is
//     answered with its owner's existing lock only if no Expire of it is
//     decided or in flight (lessor.Regrant).
//
// The files follow the concerns: node.go (New, Close, options), leadership.go
// (promote, demote, the quorum confirmation), grant.go (Acquire's grant and
// ghost path), apply.go (the apply hook, Expire proposals), route.go (serving
// on the leader or forwarding), errmap.go (sentinels and connect codes),
// lockservice.go and clusterservice.go (the handlers). Step-by-step scripts of
// the lock logic are in testdata/interaction (interaction_test.go).
//
// The HTTP side is package httpapi: the API's http.Server and its
// handler chain, TLS serving and certificate reload, the connection cap,
// the request-body timeout, CORS, the probes, the hints for malformed
// calls, the audit text of the caller, the metrics listener, the RPC log
// and the worker pool. In this package, secure.go wires the node's
// transport security (the exposure check, the HTTP side, peer TLS for the
// backend, TLS for forwarding), serve.go hands Serve and ServeMetrics to
// the HTTP side, and readiness.go answers the readiness questions it asks
// of the lock service (httpapi.Node).
//
// Followers forward writes and linearizable reads to the leader, one hop
// (package forward), and name the leader in Unavailable errors. errmap.go is
// the single place that maps errors to connect codes (docs/api.md#errors).
//
// # Usage
//
//  1. Load and validate a config.Config (package config).
//  2. Build the node with New(cfg, WithLogger(log)); it opens the backend
//     named by cfg.Backend and recovers from cfg.DataDir or bootstraps.
//  3. Listen on cfg.APIAddr and call Serve(listener) in a goroutine.
//  4. On SIGTERM, call Close(ctx): waiters fail with Unavailable, a leader
//     hands over leadership, in-flight requests finish, the backend closes.
//
// Example:
//
//	n, err := server.New(cfg, server.WithLogger(log))
//	if err != nil {
//		return err
//	}
//	ln, err := net.Listen("tcp", cfg.APIAddr)
//	if err != nil {
//		return err
//	}
//	go n.Serve(ln)
//	<-ctx.Done()
//	return n.Close(context.Background())
package server
