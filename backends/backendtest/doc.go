// Package backendtest is the conformance suite every ticketd consensus backend
// passes, in the manner of testing/fstest.TestFS: a backend's test calls
// Run with a Factory that opens one of its nodes, and the suite builds real
// clusters of them (loopback TCP, storage in t.TempDir(); WithLogStore runs
// them on each Raft log store) and checks the
// core.Consensus and core.Membership contracts: ordered replication,
// not-leader errors, ReadIndex, leader failover without losing acknowledged
// commands, restart from disk, snapshot install (with the OnRestore hook
// called between applies on the lagging follower), partitions, membership
// changes under load, and the new leader's barrier before it reports ready.
//
// The harness is exported for other suites: Cluster (Start, Join, Kill,
// Restart, Partition, Heal, Leader, WaitLeader, WaitApplied, EnsureSame,
// Propose), the fault-injecting Network wired through Config.DropMessage, and
// the ApplyLog/LeaderLog recorders of OnApply, OnRestore and OnLeaderChange.
// Its model is hashicorp/raft's testing.go cluster. BenchmarkCommit is the
// commit latency/throughput benchmark both backends run through the same
// harness.
//
// # Usage
//
//  1. In the backend's test package, call Run(t, factory) from one test; the
//     factory adapts the backend's New to return a Node.
//  2. Keep the package's TestMain checking for leaked goroutines (goleak): the
//     suite closes every node it opened.
//  3. To reuse the harness, make a Cluster with NewCluster, set Tune before
//     Start if the nodes need other thresholds, and use its helpers from the
//     test goroutine (they call t.Fatal).
//  4. For the commit benchmark, call BenchmarkCommit(b, factory) from the
//     backend's BenchmarkCommit.
//
// Example:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, func(cfg backends.Config) (backendtest.Node, error) {
//			return hashicorp.New(cfg)
//		})
//	}
package backendtest
