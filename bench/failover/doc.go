// Package failover measures how long a ticketd cluster takes to accept
// writes again after its leader dies: three real ticketd
// processes (the binary `make build` makes, built by Build) on loopback, a
// light write load through the Go SDK, and Kills rounds of: find the leader,
// kill -9 it, time the first write acknowledged through a survivor, restart
// the dead node on its data and wait until it has caught up.
//
// The write that ends the measurement is an SDK Acquire of a fresh key sent
// right after the kill: the SDK finds the new leader by itself (its retry,
// backoff and leader discovery are part of what a user waits for), so the
// figure is what an application sees, not only the election.
//
// The CPU each process used is read when it exits (os.ProcessState user and
// system time) and for the benchmark process from /proc/self/stat, so the
// report can say which share of the machine the nodes and the client had.
//
// # Usage
//
//  1. Build the binary once: bin, err := failover.Build(ctx, "", dir).
//  2. Run one backend: res, err := failover.Run(ctx, failover.Config{Binary: bin,
//     Backend: "etcd", Dir: dir, Kills: 5}).
//  3. Read res.Kills (one figure or error per kill) and res.CPU.
//
// Other measurements of real processes start a Cluster themselves (Start,
// Settle, Kill, Restart, FirstWrite, Nodes for each process's addresses,
// data dir, log and pid), as bench/scale does.
package failover
