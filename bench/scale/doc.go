// Package scale measures what must not grow with the lock table: a cluster
// of three real ticketd processes (bench/failover's Cluster) is filled step
// by step with exclusive locks of long leases (10k, 100k, 1M by default),
// and at each step the package measures the fill rate, Acquire latency,
// `ticketctl snapshot save` and `ticketd restore`, each node's data dir and
// RSS, a follower's kill -9 → ready, and kill -9s of the leader → first
// acknowledged write with the new leader's Raft leadership → promotion
// read from its log. After the last step it can add sessions holding many
// locks each to the table, as a step of its own measured the same way and
// labelled with all it holds ("1M + 10k sessions × 100 = 2M"), so the
// exclusive steps keep their size; at the very end it renews held locks
// many times and measures the data dirs again (the disk must stay a small
// multiple of the snapshot, not grow with the writes).
//
// The fill is not the benchmark: it runs with many concurrent SDK clients
// (group commit), and its rate is one figure among the others.
//
// # Usage
//
//  1. Build the binaries: failover.BuildCommand(ctx, "", dir, "ticketd") and
//     the same for "ticketctl".
//  2. Run one backend: steps, err := scale.Run(ctx, scale.Config{Binary: bin,
//     Ctl: ctl, Backend: "etcd", Dir: dir, Steps: []int{10_000, 100_000}}).
//  3. Read one report.ScaleStep per step (the sessions step last); a figure that could not be
//     measured is zero and the step's Errors say why.
package scale
