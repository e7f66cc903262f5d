// Command etcdpeer is ticketbench's peer: etcd itself, three members embedded
// in this process (go.etcd.io/etcd/server/v3/embed) on loopback with their
// data in a temporary directory and fsync on, running the workload ticketd's
// lock benchmark runs — each worker takes and releases a lock on a key of its
// own, here with client/v3's concurrency.Mutex (Lock = one Txn, Unlock = one
// Delete, both Raft writes, as ticketd's Acquire and Release are each one
// commit). The client talks to the leader only, as ticketd's benchmark client
// does.
//
// It is its own module, outside go.work, so that etcd's requirements never
// change the versions the product builds with; ticketbench builds it with
// `GOWORK=off go build` (package bench/peer) and runs it as a subprocess.
//
// # Usage
//
//  1. Build: `cd bench/etcdpeer && GOWORK=off go build`.
//  2. Run: `etcdpeer -concurrency 1,16 -duration 2s -warmup 500ms [-mode open -rate 2000] [-dir /tmp]`.
//  3. Read one JSON object (bench/peer.Output) on stdout; stderr carries a
//     line "etcdpeer: concurrency N" when each level starts, and errors.
//
// Each worker has one concurrency.Session (a lease kept alive), made before the
// measurement; the lock and unlock are what is timed, as one cycle.
//
// The members run in this process and the clients in a process of their
// own (this binary again, started per level through bench/loadproc), which
// reads the CPU time of both processes from /proc at the edges of each
// measured window: each result carries the members' and the clients' CPU
// (load.Result.CPU), as ticketbench's ticketd figures do.
//
// With -workload keepalive it measures etcd's LeaseKeepAlive instead: each
// worker holds a lease of its own and sends one KeepAliveOnce per operation,
// the peer of ticketd's Renew; output System "etcd-keepalive".
// With -workload session-keepalive-stream each worker's lease has -keys
// keys (10) attached and is renewed by one request per operation on a
// LeaseKeepAlive stream the worker keeps open, as clientv3 does in
// production: the peer of ticketd's session keep-alive, which the SDK sends
// on a KeepAliveStream kept open per session (ticketbench's keepalive
// workload). -workload session-keepalive renews with one KeepAliveOnce per
// operation instead (by hand only).
//
// Example:
//
//	cd bench/etcdpeer
//	GOWORK=off go run . -concurrency 1,16 -duration 1s 2>/dev/null | jq '.results[].per_sec'
//	# two numbers: Lock+Unlock cycles per second at 1 and at 16 clients
package main
