// Package nemesis schedules and injects faults into a running ticketd
// cluster, in the manner of Jepsen's nemeses: process crashes (kill -9 and
// restart of a node or of the leader, or of every node at once), pauses
// (SIGSTOP/SIGCONT of a node or of the leader, longer than the election
// timeout or than a lease), network partitions (the leader isolated, a
// majority/minority split, a one-way cut), leadership transfers, and a
// membership change (remove a node, then add it back). Over a NetTarget
// (hosts in network namespaces, faults/hosts) it also injects real network
// faults (NetKinds): a link set down, a flapping link, and a node restarted
// on a new address; there, cut links are blackhole routes. Over a DiskTarget
// it also injects disk faults (DiskKinds): damaged bytes in the payload of
// an entry a node's log store appended (DamageSpot finds one in the
// store's own file format; the node must refuse to start) and a full disk
// (the node must stop at its first append, saying so). Over a PowerTarget
// (data dirs on faults/powerfs) it cuts the power of every node at once
// (PowerKinds): every write not made durable is lost, then all restart.
//
// A Schedule is generated from a seed and a Config alone, so printing the
// seed is enough to replay the same faults: Generate(seed, cfg) returns the
// same Schedule every time. Targets that depend on the cluster's state at
// the time (which node leads) are resolved when a fault starts, and the
// Executor records what it actually did as Events.
//
// # Usage
//
//  1. Implement Target over the cluster (the faults harness does so over
//     sdk/ticketdtest processes and a DropMessage rules file).
//  2. s := Generate(seed, cfg); print s.String() along with the seed.
//  3. ex := NewExecutor(target, clock); ex.Run(ctx, s) injects each fault at
//     its offset, holds it for its Duration and heals it, in order.
//  4. After the run, ex.HealAll(ctx) undoes whatever is still broken (a
//     cancelled run may stop in the middle of a fault) and ex.Events()
//     returns the log of what happened, for the report and the
//     visualisation.
//
// Example:
//
//	s := nemesis.Generate(42, nemesis.Config{Nodes: 3, Length: time.Minute,
//		ElectionTimeout: 500 * time.Millisecond, Lease: 2 * time.Second})
//	fmt.Print(s)
//	ex := nemesis.NewExecutor(target, rec.Now)
//	ex.Run(ctx, s)
//	ex.HealAll(context.Background())
package nemesis
