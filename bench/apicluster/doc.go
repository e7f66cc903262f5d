// Package apicluster starts a real three-node ticketd cluster in this process
// for the lock benchmark: three server.Nodes (the same code as cmd/ticketd),
// each serving the Connect API on its own loopback port (HTTP/1.1 and h2c),
// each with its chosen consensus backend on its own Raft port and badger data
// directory. Clients reach it over real HTTP/2 on loopback, as users do.
//
// # Usage
//
//  1. Call Start with the backend name and a directory; it returns once a node
//     leads and has served one Acquire+Release.
//  2. Client() is a LockService client of the leader (h2c, Connect protocol);
//     LeaderURL() its base URL.
//  3. Close stops every node and removes the directory.
//
// Example:
//
//	c, err := apicluster.Start(ctx, apicluster.Config{Backend: "hashicorp", Dir: dir})
//	defer c.Close()
//	res, err := c.Client().Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 5000})
package apicluster
