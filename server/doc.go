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
// Followers forward writes and linearizable reads to the leader, one hop
// (package forward), and name the leader in Unavailable errors. errmap.go is
// the single place that maps errors to connect codes (docs/api.md#errors).
//
// # Files
//
// The node and its role:
//   - node.go: Node, New, Close, the options.
//   - role.go: the role the request path reads (promoted, term, closing).
//   - leadership.go: promotion and demotion, the quorum confirmation.
//   - leaderstate.go: what the promoted leader has in flight (counters,
//     KeepAlive rounds).
//   - backend.go: the one place that chooses a consensus backend.
//   - failstop.go: the first fatal backend error, handed to the process.
//   - bootstrapcheck.go: the refusal to bootstrap a data dir twice.
//   - membership.go: the checks before a membership change (the members
//     that answer, a quorum left).
//   - commandversion.go: the leader's cluster command version, the
//     minimum of the command versions its members apply, which gates
//     entries of a newer version (RenewBatch) and members of an older
//     binary.
//   - restore.go: a new cluster's data from a snapshot file.
//
// The lock service:
//   - route.go: serve on the leader, or forward one hop.
//   - lockservice.go: LockService's lock RPCs (Release and force-release,
//     Renew's handler, GetLock, ListLocks, CheckToken).
//   - acquire.go: Acquire's validation, handed to grant.go.
//   - grant.go: Acquire on the leader: the queue's turn, the detached
//     Grant, idempotent retries, ghost locks, the wait queue's view of a key.
//   - releasehandoff.go: a Release that hands the key's turn to its head
//     waiter as it is proposed (docs/design.md#handoff).
//   - renew.go: a Renew on the leader, admitted by the lessor.
//   - apply.go: the apply and restore hooks, the lessor's Expire proposals.
//   - applytimes.go: opens the node's record of when it applied each index
//     (package applytime), so a restarted node measures replayed leases from
//     its earlier apply (docs/design.md#leases).
//   - leasereport.go: PeerService.LeaseRemaining, a voter's report of the
//     time each lease has left on its clock, answered to members only.
//   - leasegather.go: a new leader gathers those reports from the voters
//     after its promotion and lowers its deadlines to them (the quorum
//     minimum, docs/design.md#leases).
//   - sessionservice.go: CreateSession, KeepAlive, CloseSession.
//   - sessionread.go: GetSession, ListSessions.
//   - keepalivestream.go: KeepAliveStream, keep-alives as messages of one
//     bidirectional stream, each served as a KeepAlive; its caps.
//   - keepalivebatch.go: concurrent KeepAlives of a session merged into one
//     entry in flight.
//   - renewbatch.go: renewals (KeepAlive rounds, Renews) that arrive while
//     renewal entries are in flight written together as one RenewBatch,
//     once every member applies one (commandversion.go).
//   - sessioncount.go: limits.max_sessions and
//     limits.max_sessions_per_principal.
//   - sessionlocks.go: limits.max_locks_per_session.
//   - quota.go: the policy's per-principal quotas.
//   - auth.go: authentication and the ownership check wired into the node,
//     the principal a Grant is bound to, the audit log.
//   - watchservice.go: Watch and the consistent table reads it shares with
//     ListLocks.
//   - snapshotservice.go: ClusterService.Snapshot.
//   - clusterservice.go: ClusterService (Status, members, leadership
//     transfer).
//   - errmap.go: sentinel errors and their connect codes.
//
// Serving and observing (the HTTP side itself is package httpapi: the
// http.Server and its handler chain, TLS serving and reload, connection
// limits, the request-body timeout, CORS, probes, hints for malformed calls,
// the audit text of the caller, the RPC log, the metrics listener and the
// worker pool):
//   - secure.go: the node's transport security: the exposure check, the
//     HTTP side built from the config, peer TLS for the backend, TLS for
//     forwarding.
//   - serve.go: Serve and ServeMetrics, handed to the HTTP side.
//   - readiness.go: the lock service's answers to /readyz (httpapi.Node).
//   - metrics.go, metrics_cluster.go, metrics_peers.go, metrics_quota.go:
//     Prometheus metrics of requests, Raft, peers and quotas.
//
// Tests: interaction_test.go runs the step-by-step scripts of
// testdata/interaction on the harness (harness_test.go, with
// harness_gate_test.go, harness_session_test.go and harness_watch_test.go);
// interleave_test.go runs random interleavings of the same steps (rapid)
// against the invariants; the other _test.go files are named after the file
// or the behaviour they test, on in-process clusters (internal/nodetest) or
// the in-memory stand-in backend (internal/memraft); _bench_test.go files
// are the benchmarks.
//
// # Concurrency
//
// Goroutines, and where they start:
//   - Serving: Serve (httpapi/serve.go) runs the http.Server; net/http starts a
//     goroutine per connection, and for HTTP/2 per request. Unary calls over
//     HTTP/2 run on the worker pool (httpapi/workerpool.go: workers start on demand,
//     up to maxWorkers, and end at Close); streams (Watch, Snapshot) stay on
//     their request's goroutine.
//   - Detached proposals, counted in Node.bg so that Close waits for them: a
//     Grant, and a ghost lock's Release after it, on a worker (grant.go); a
//     session's KeepAlive rounds on a worker (keepalivebatch.go); shared
//     renewal entries on a worker, one after another (renewbatch.go); a
//     CloseSession (sessionservice.go, proposeClose); ensureMembers and
//     the gathering of the voters' lease reports (one goroutine per voter,
//     waited for) after each promotion (leadership.go, leasegather.go);
//     the members' command versions, asked every few seconds while the
//     node leads (one goroutine per member and round, waited for:
//     commandversion.go); a round of renewals that no longer share an
//     entry, one goroutine per renewal, waited for (renewbatch.go);
//     join (node.go, New). A force-release
//     proposes each holder's Release on a goroutine its handler waits for
//     (lockservice.go).
//   - Parallel probes that their caller waits for: bootstrapcheck.go (the
//     other members, before a bootstrap), membership.go (the voters, before
//     a membership change).
//   - Reload loops until the node's life ends: the Authenticator's SIGHUP
//     loop (auth.go) and the certificate reloaders (httpapi/server.go).
//   - The lessor (package lessor): its expiry loop, started by lessor.New,
//     and a goroutine per batch of due leases; they call Confirm, Expire,
//     ExpireSession and OnDelayEnd without a lessor lock held.
//   - The backend: its apply goroutine calls onApply and onRestore (apply.go)
//     in log order; one backend goroutine calls onLeaderChange
//     (leadership.go) in order; OnFatal once (failstop.go).
//
// Locks, outermost first: a lock on the left may be held while the one on
// its right is taken, never the other way round.
//   - waitq shard mutex → waitq principal counts (waitq's own).
//   - waitq shard mutex → table read lock, released, then lessor mutex: the
//     queue calls keyState (waitq.Config.State) with the key's shard mutex
//     held; keyState reads the holders (core.StateMachine.Holders) and then
//     asks the lessor whether each is ending (lessor.Lessor.Ending) or the
//     key is under a lock-delay (Delayed).
//   - table read lock, released, then lessor mutex: LeaseRemaining
//     (leasereport.go) reads a page of the table, then asks the lessor for
//     its reports; Lower takes only the lessor's mutex.
//   - lessor mutex → table read lock: Promote and Resync read the table
//     under the lessor's mutex, so a table callback (Ascend*) must never ask
//     the lessor.
//   - watch hub mutex → table read lock (Applied, a Watch's snapshot read).
//   - leaderState counters (sessioncount.go, sessionlocks.go, quota.go) →
//     table read lock, the Authenticator's read lock (the policy's quotas).
//   - table read lock (an Ascend* callback) → the Authenticator's read lock
//     (ListSessions asks MayActFor of each session).
//   - role's mutex, the keepAliveBatches and renewalRounds mutexes, the
//     forwarder's and the peers' metrics mutexes take nothing else
//     (keepAliveBatches.join's start only hands a round to a worker, which
//     never blocks; a renewal is proposed after renewalRounds.join
//     returns).
//
// Callbacks, and the locks held when they run:
//   - keyState: the key's shard mutex. It must not block, propose, or call
//     into the queue; it takes the table's read lock and the lessor's mutex
//     one after the other.
//   - a waiter's Admit (quotaAdmit): the shard mutex and the queue's
//     principal counts; it only counts a refusal in the metrics.
//   - the lessor's Confirm, Expire, ExpireSession, OnDelayEnd: no lock.
//     OnDelayEnd (onDelayEnd) kicks the queue, which takes a shard mutex and
//     calls keyState.
//   - onApply and onRestore: no lock of the node. They take the watch hub's,
//     the lessor's and a shard's mutex (queue.Kick) one at a time, never
//     block and never propose.
//   - onLeaderChange: no lock. It takes the role's mutex, the lessor's, and
//     every shard mutex (queue.Open, queue.Close) one at a time.
//   - a watch's Admit and Snapshot: the watch hub's mutex.
//
// "Is this holder ending?" has one owner: the lessor. Besides the leases it
// times and expires itself, it keeps the marks of the removals the leader
// decides elsewhere (a ghost lock's Release, a CloseSession in flight), and
// lessor.Lessor.Ending answers under its one mutex; Node.ending and keyState
// adapt the table's holders to it.
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
