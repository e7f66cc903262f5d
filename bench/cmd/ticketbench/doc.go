// Command ticketbench measures ticketd's consensus backends side by side on
// this machine, in one run: commit latency and throughput of each backend's
// three-node cluster, Acquire+Release through ticketd's API on each backend,
// etcd's own concurrency.Mutex as the peer, and the physical floor (fsync of a
// small append, loopback TCP round trip) the commits are compared to.
//
// # Usage
//
//  1. Pick the windows: -duration per measurement (default 1s) after -warmup
//     (default 500ms), -rounds (default 3; backends alternate their order each
//     round), -concurrency (default 1,16,64,256).
//  2. Pick what to measure: -backends (default hashicorp,etcd), -workloads
//     (commit,lock,renew,handoff,snapshots,failover by default; shared,
//     the shared-locks benchmark at -shared-concurrency, default 1,16,64,
//     is added by -quick or asked for by name; scale, three ticketd
//     processes filled to each of -scale-steps locks and measured there,
//     is asked for by name only), -peer (etcd Mutex and LeaseKeepAlive, default on), -mode closed|open with -rate (operations/s) for an open loop
//     without coordinated omission.
//  3. Read the table on stdout and, in -out (default bench/results/<time>):
//     report.json (every figure, with the rounds and ops it comes from),
//     summary.md (medians, ratios, aims) and the PNG plots.
//
// Example:
//
//	make bench BENCHFLAGS='-duration 1s -rounds 2'
//	go run ./bench/cmd/ticketbench -backends hashicorp -concurrency 1,64 -peer=false
//
// -cpuprofile FILE writes a CPU profile of the run: every cluster and client
// runs in this process (the etcd peer excepted), so `go tool pprof` on it
// shows where a backend or the API spends its time.
//
// The defaults take about 2½ minutes on two cores, the first run about 4
// (compiling, and building the etcd peer). A progress line goes to stderr.
// Ctrl-C stops the run and still writes what was measured.
package main
