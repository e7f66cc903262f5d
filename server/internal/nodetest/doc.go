// Package nodetest starts in-process ticketd nodes (server.Node) on loopback
// for the server's black-box tests and benchmarks: real HTTP/2 (h2c) between
// client and node and between nodes, real backends with data in t.TempDir(),
// and connect clients ready to use. It is the in-process sibling of
// sdk/ticketdtest, which runs ticketd binaries.
//
// # Usage
//
//  1. Start a cluster with Start(t, n); options: WithServerOptions (for
//     instance a stand-in backend through server.WithBackend, or a fake
//     clock), WithConfig to edit each node's config, WithLogs.
//  2. Use Leader(t), Follower(t) or Nodes[i], and their Lock and Cluster clients.
//  3. Stop(i) closes a node gracefully, Restart(t, i) brings it back on the
//     same addresses and data, Join(t, via) adds a node through join.
//     Everything is closed by t.Cleanup.
//
// Example:
//
//	c := nodetest.Start(t, 3)
//	res, err := c.Leader(t).Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 5000})
package nodetest
