// Command fenced-counter shows why a lock needs a fencing token. A toy
// storage server (in this process) keeps a counter and refuses any read or
// write whose token is lower than the highest it has seen. Worker processes
// loop lock → read → increment → write with token → unlock against a
// ticketd cluster. One worker is stopped with SIGSTOP after it has read the
// counter and checked that its lease is still valid; its lease runs out, the
// next worker takes the lock with a higher token, and when the stopped
// worker wakes up and writes, the store refuses the write. The run ends
// with a check that no increment was lost and no stale write accepted.
//
// # Usage
//
// The caller's duties:
//
//  1. Start a cluster and point -endpoints at it.
//  2. Run on a unix system (the stall uses SIGSTOP and SIGCONT).
//
// Example:
//
//	make run                       # a local three-node cluster on 127.0.0.1:7001-7003
//	go run ./sdk/examples/fenced-counter [-workers 3] [-rounds 5] [-ttl 2s]
//
// See README.md for the idea in a few lines.
package main
