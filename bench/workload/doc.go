// Package workload holds the operations ticketbench times, as load.Ops:
//
//   - Commits: each worker alternates core.Grant and core.Release of a key of
//     its own through core.Consensus.Propose on the current leader, so every
//     operation is exactly one replicated commit and concurrent workers never
//     contend for a key. Latency is the Propose call until its result returns.
//   - Locks: each worker runs an Acquire (no waiting) then a Release of a key
//     of its own through ticketd's Connect API, one cycle per operation: two
//     commits, as an etcd concurrency.Mutex Lock+Unlock is (bench/etcdpeer).
//   - Renews: each worker renews a lock of its own (acquired before the
//     measurement) per operation.
//   - KeepAlives: each worker opens a session holding N locks before the
//     measurement and keeps it alive (LockService.KeepAlive) per
//     operation.
//   - Handoffs: the contended handoff workload, a
//     handoff.CycleFunc: every worker Acquires the one key with wait=true,
//     notes the time and token, Releases and notes the time; package
//     handoff pairs the cycles into handoffs.
//   - Holders: the shared-locks benchmark: each worker runs an
//     Acquire (wait=true) then a Release per operation, all workers on one
//     key in MODE_SHARED, on one key exclusively, on a slot of one key as a
//     semaphore of limit SemaphoreLimit, or each on a key of its own
//     (Holding says which).
//
// Both check every result (a Grant must be granted, a Release must release),
// so a figure can never come from operations that silently did nothing.
//
// # Usage
//
//  1. Make the op with the number of workers it will be driven by (the
//     load.Config's Concurrency) and where to send it.
//  2. Pass it to load.Run; calls for one worker never overlap, which is what
//     lets each worker keep its own key's state without a lock.
//
// Example:
//
//	op := workload.Commits(cluster.Leader, 64, "r1")
//	res, err := load.Run(ctx, load.Config{Concurrency: 64, Duration: 2 * time.Second}, op)
package workload
