// Package floor measures the physical floor under a replicated commit on this
// machine: how long a small durable append to the disk takes (write + fdatasync)
// and how long a small message takes to go to a peer and back over TCP on
// loopback. A three-node Raft commit needs at least one durable append and one
// round trip to a follower, so fsync p50 + RTT p50 is a lower bound for the
// commit p50 that ticketbench compares the backends against. Badger measures
// the same append through badger with SyncWrites, the storage engine both
// backends log to, so the report can tell the disk's cost from badger's.
//
// # Usage
//
//  1. Call Fsync with a directory on the filesystem the Raft data lives on (the
//     measurement writes and then removes one file there).
//  2. Call RTT; it listens on 127.0.0.1:0, so it never collides with other ports.
//     Call Badger with the same directory for the storage engine's append.
//  3. Each returns a latency.Summary of every sample taken (count included),
//     latencies in microseconds. Run them one at a time: they are safe to
//     call concurrently, but would then measure each other.
//
// Example:
//
//	disk, err := floor.Fsync(ctx, dataDir, floor.Config{})
//	net, err := floor.RTT(ctx, floor.Config{})
//	lowerBound := disk.P50US + net.P50US
package floor
