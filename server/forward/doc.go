// Package forward sends a follower's client requests to the leader, one hop
// (docs/design.md#modules, docs/design.md#reads).
//
// Writes (Acquire, Release, Renew), membership changes and linearizable reads
// (GetLock, ListLocks without stale, CheckToken) must be served by the leader.
// A follower that receives one forwards it over HTTP/2 (h2c) with the
// connect protocol, marking it with Header. A marked request that reaches a
// node that is not the leader (leadership moved in between) is not forwarded
// again: that node answers Unavailable with a ticket.v1.LeaderHint, and the
// client retries. Deadlines travel with the request (connect's timeout
// header), and a client that goes away cancels the forwarded call too, so the
// leader's ghost-lock release sees it.
//
// Every request a Forwarder's clients send on a handler's behalf carries the
// original caller's identity (docs/security.md#forwarding-keeps-the-callers-principal):
// its bearer token unchanged, or, for
// a certificate principal, security.PrincipalHeader, which the leader
// believes only from a member's node certificate. The leader therefore
// authorizes, and binds locks to, the caller and never the forwarding node.
//
// # Usage
//
//  1. Build one Forwarder per node with New(Config{Self: nodeID}).
//  2. In a handler, if Forwarded(ctx) is true and this node is not the
//     leader, return Unavailable plus the leader hint; never forward it.
//  3. Otherwise, on a follower, forward with Call and the client of the
//     leader's API address from Lock or Cluster.
//  4. Close on shutdown.
//
// Example:
//
//	f := forward.New(forward.Config{Self: "n2"})
//	res, err := forward.Call(ctx, f, "n1", f.Lock("127.0.0.1:7001").Acquire, req)
package forward
