// Package etcd is ticketd's consensus backend on etcd raft
// (go.etcd.io/raft/v3 v3.7.0, pointer raftpb types): a core.Consensus and
// core.Membership whose raft log, HardState and snapshots live in the log
// store Config.LogStore names — badger/v4 (internal/raftstore) or etcd's own
// write-ahead log and snapshot files (internal/walstore, the only part of
// etcd's server module it uses) — and whose peer traffic is our own batched
// transport (internal/transport): each peer's messages on one HTTP/1.1
// connection upgraded to a raw stream that the peer's send goroutine
// writes and the receiver's handler reads itself, snapshots over HTTP/2.
//
// One goroutine drives a raft.RawNode as etcd raft's doc.go prescribes: it
// ticks every HeartbeatInterval (ElectionTick = ElectionTimeout /
// HeartbeatInterval; PreVote and CheckQuorum on), steps received messages,
// hands every waiting proposal to raft as one MsgProp, and for each Ready
//
//  1. sends the messages that do not acknowledge this Ready's state (MsgApp,
//     heartbeats, snapshots), so the leader's fsync overlaps replication
//     (Raft thesis §10.2.1); the leader holds an empty MsgApp, which only
//     tells a follower the new commit index, for one round of the loop, and
//     drops it when the next MsgApp to that follower (its proposers' next
//     batch, which carries the commit index too) is sent first
//     (commitnotice.go);
//  2. on the leader, applies the committed entries to the
//     core.StateMachine, calls OnApply and wakes the proposers by proposal
//     id — before the fsync of this Ready's new entries, since committed
//     entries are durable on a quorum already (after it when the Ready
//     carries a snapshot, which is restored first); a follower, which
//     answers no proposer, applies after step 4, so its apply never delays
//     its acknowledgement of the entries that came with the commit index;
//  3. persists HardState, entries and snapshot in one synced write of the
//     log store (a badger batch, or a WAL append);
//  4. sends the rest (append and vote responses, or everything when the term
//     or vote changed);
//  5. serves the ReadIndex batches raft answered, calls Advance, and, when
//     backends.SnapshotDue says so (at least SnapshotThreshold entries and
//     as many bytes of log as the last snapshot since it), hands a
//     copy-on-write copy of the state machine to a goroutine that writes
//     the snapshot and then compacts the log while the loop goes on
//     (snapshot.go).
//
// Received messages are stepped before new proposals, so acknowledgements
// that arrived during an fsync commit entries without waiting behind the
// next batch. Proposals are group-committed: while a batch is uncommitted
// the leader keeps new ones queued (at most 2ms), and once a batch applies it
// yields briefly so that the proposers it answered can queue their next
// proposals, which then leave together — one fsync per node per batch rather
// than a trickle of small ones. etcd raft's AsyncStorageWrites (etcd raft
// doc.go, "Usage with Asynchronous Storage Writes": the log written by an
// append thread from MsgStorageAppend messages, their responses delivered
// once durable) was tried twice and is not used: first on badger, where it
// did not beat this loop on a 2-core machine running all three nodes (it
// trades the blocking fsync for many more, smaller messages); then on the
// wal store, with an append thread that merges the MsgStorageAppends queued
// behind a sync into one Save, where go test -bench BenchmarkCommit gave
// no consistent direction on a machine at load 14-16: at 1 proposer p50
// 458 vs 672 µs, then 417 vs 411 µs (async vs this loop); at 64 proposers
// 10.9k vs 18.3k commits/s, then 44.9k vs 23.6k (docs/benchmarks.md has the
// rows and the commit that holds the code, to measure it again quietly).
// This loop already sends MsgApp before its own fsync (step 1), the part of
// Raft thesis §10.2.1 that overlaps the leader's write with replication —
// as far as Go's scheduler lets it: Send only queues the message, and its
// peer sender, made runnable on the loop's processor, often runs only once
// another thread steals it or the fsync returns (docs/benchmarks.md, "Where
// an etcd commit's time goes at one client", which also has why a yield
// before the fsync was not kept). From there a message passes two
// goroutines to the receiving loop (the sender writing its connection, the
// receiver's handler reading it), not five as over HTTP/2; at one client
// that moved commit p50 by less than the machine's noise
// (docs/benchmarks.md, "An upgraded peer stream for the etcd backend").
//
// Entries carry an envelope (envelope.go): a version byte and an 8-byte
// proposal id in front of core.Encode's bytes. Snapshots carry the address
// book (member ids and raft addresses) in front of the core snapshot, and
// ConfChange.Context carries a member's id and raft address, so a node that
// joins with an empty data dir learns its peers from replicated membership:
// the server hands it the members it read from the --join member's Status
// (backends.PeerLearner) before the AddMember, and never a request header.
//
// A new leader reports IsLeader=true (OnLeaderChange, from one goroutine, in
// order) only after it has applied an entry of its own term (the empty entry
// etcd raft appends on election): the barrier
// docs/design.md#the-consensus-contract asks for.
//
// The loop's concerns live in files their names find, as etcd raft keeps
// read_only.go apart: loop.go (the loop and each Ready), propose.go
// (proposals and group commit), read.go (ReadIndex batching and
// ConfirmTerm), apply.go (committed entries, installed snapshots),
// snapshot.go (taking snapshots), membership.go,
// watermark.go (the durable end-of-log record), and request.go (the one
// generic caller/loop exchange all of them use).
//
// # Failure
//
// The node is fail-stop: an undecodable entry (core.ErrDecode), a failed
// storage write (a full disk: badgerlog.ErrDiskFull) or a panic in the loop
// stops the loop, calls Config.OnFatal once, and every call then fails with
// core.ErrStopped. At start, New refuses a log that ends before the index
// the node's watermark records (internal/watermark: badger drops the tail
// of a damaged memtable log silently), naming the gap and telling to
// replace the member. Status().RecoveredCommitIndex is the larger of the
// stored HardState's Commit and the watermark's applied index. Every error
// the Consensus and Membership methods return matches one of core's.
//
// # Usage
//
//  1. Build a backends.Config: ID, RaftAddr (and BindAddr), DataDir,
//     StateMachine, Bootstrap for the founding members of a new cluster (empty
//     for a node that will be added later), OnApply and OnLeaderChange.
//  2. n, err := etcd.New(cfg). It fails with ErrCorrupt when the data dir is
//     damaged and with badgerlog.ErrWrongBackend when it belongs to the
//     hashicorp backend.
//  3. Propose, ReadIndex and the Membership methods on the leader; others
//     return *core.NotLeaderError naming the leader. Follow OnLeaderChange.
//  4. To add a node: start it with an empty Bootstrap, then call AddVoter on
//     the leader.
//  5. Close on shutdown.
//
// Example:
//
//	n, err := etcd.New(backends.Config{
//		ID: "n1", RaftAddr: "127.0.0.1:7101", DataDir: "data/n1",
//		Bootstrap:    []core.Member{{ID: "n1", RaftAddr: "127.0.0.1:7101"}},
//		StateMachine: core.NewStateMachine(),
//	})
//	if err != nil {
//		return err
//	}
//	defer n.Close()
//	res, err := n.Propose(ctx, core.Grant("key", 10_000, "owner"))
package etcd
