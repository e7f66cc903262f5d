// Package suite is ticketbench's pipeline: it runs every measurement of a
// benchmark run in repeated rounds and returns the report.Report.
//
// Each round measures, in this order:
//
//  1. The physical floor on the data directory's disk and on loopback
//     (package floor).
//  2. The commit workload on each backend (package backendcluster and
//     workload.Commits), one fresh three-node cluster per backend per round,
//     every concurrency level on it in increasing order.
//  3. The lock workload through ticketd's API on each backend
//     (package apicluster and workload.Locks), and on the etcd peer
//     (package peer) when asked for; on the same ticketd cluster, the
//     contended handoff workload at 2, 8 and 32 clients (package handoff),
//     and the etcd peer's handoff workload; then, when asked for, the
//     shared-locks benchmark (one key shared, one key exclusive,
//     a semaphore of limit 8, distinct keys; each level's four cases back
//     to back). Around every API level the leader's term is read, to count
//     elections.
//  4. The renew workload (ticketd Renew, etcd LeaseKeepAlive).
//  5. The keepalive workload (ticketd sessions of 10 locks kept
//     alive by KeepAlive, etcd leases of 10 keys by LeaseKeepAlive).
//  6. The commit workload at 64 clients with snapshots on and off, each on
//     a fresh cluster, per backend and log store (Config.LogStores).
//
// ticketd's nodes run in this process; the clients of every API workload
// (lock, renew, keepalive, handoff, shared) run in a process of their own
// (package loadproc: this program's executable again, see ServeClients), as
// etcd's clients do beside the peer's members, and every measurement
// carries the CPU both sides used over its window (load.Result.CPU, read
// from /proc). The commit workload's proposers are in-process calls, so
// its CPU is all on the server side.
//
// After the rounds, the failover measurement (package failover) runs once
// per backend on three ticketd processes, and the CPU each side used is
// recorded (package cputime).
//
// Within steps 2 and 3 the order of the systems rotates by one each round
// (round 1: hashicorp, etcd; round 2: etcd, hashicorp; ...), so drift of the
// machine over the run (other load, disk state, thermal) hits every system
// alike; the report then gives medians over rounds.
//
// A part that fails (a cluster that does not start, the peer that does not
// build) is recorded in Report.Notes and the run goes on without its figures;
// only a cancelled ctx stops the run.
//
// # Usage
//
//  1. Fill a Config (Validate tells what is wrong) and call Run.
//  2. Write the Report it returns (report.Report.Write, charts.Write).
//
// Example:
//
//	r, err := suite.Run(ctx, suite.Config{Backends: []string{"hashicorp", "etcd"},
//		Concurrency: []int{1, 16, 64, 256}, Duration: 2 * time.Second, Rounds: 3, Progress: os.Stderr})
package suite
