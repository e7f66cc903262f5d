// Package backendcluster starts a real three-node ticketd consensus cluster in
// this process for the commit benchmark: each node is a backend (hashicorp or
// etcd adapter) made with its New(backends.Config), listening for Raft traffic
// on its own loopback TCP port, storing its log in badger (SyncWrites on) under
// its own directory, and applying to its own core.StateMachine.
//
// # Usage
//
//  1. Call Start with the backend's constructor (a NewFunc) and a directory;
//     it returns once a node reports itself leader (after its barrier entry,
//     backends.Config.OnLeaderChange).
//  2. Propose on Leader(); it follows leadership changes, and is nil while no
//     node leads.
//  3. Close stops every node and removes the directory.
//
// Example:
//
//	c, err := backendcluster.Start(ctx, backendcluster.Config{New: newHashicorp, Dir: dir})
//	defer c.Close()
//	res, err := c.Leader().Propose(ctx, core.Grant("k", 1000, "me"))
package backendcluster
