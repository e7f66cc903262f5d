// Package hashicorp is ticketd's consensus backend over github.com/hashicorp/raft
// (v1.8): a core.Consensus and core.Membership whose log and stable state live
// in the log store Config.LogStore names, badger/v4 (one database per node,
// SyncWrites on; logStore) or hashicorp/raft-wal (walStore), whose snapshots
// are core's deterministic snapshot bytes in hashicorp's FileSnapshotStore
// layout (snapshotstore.go), and whose peers talk over hashicorp's TCP
// NetworkTransport.
//
// The write path is hashicorp's (docs/apply.md in that repository): Propose
// encodes the command once (core.Encode) and calls raft.Apply; the leader loop
// gathers every queued proposal (BatchApplyCh, up to 512) into one log append,
// one fsync and one replication round; the BatchingFSM applies committed
// batches to the core.StateMachine, calls Config.OnApply per entry, and the
// future returns the core.Result to the proposer.
//
// A new leader commits and applies a core.Noop barrier of its term before it
// reports IsLeader=true through Config.OnLeaderChange, so everything committed
// in earlier terms is applied by then (docs/design.md#the-consensus-contract;
// Raft thesis §6.4). ReadIndex confirms leadership with hashicorp's
// VerifyLeader (a quorum of heartbeats) and waits until the state machine has
// applied the commit index read at the call.
//
// Each concern lives in a file its name finds, as in the etcd backend:
// node.go (the Node, New, Leader, Status, Close and the fail-stop),
// propose.go (Propose), submit.go (Submit, ordered ahead of later
// proposals), read.go (ReadIndex and ConfirmTerm), membership.go,
// request.go (the start and await of every Raft operation, the one
// exchange with the library they all use), leader.go (the barrier and the
// leader events), fsm.go (the BatchingFSM), snapshot.go (when to take a
// snapshot), progress.go (followers' lag and last contact), errors.go
// (sentinels, and hashicorp's errors mapped to core's), watermark.go and
// recover.go (Restore, Config.ForceNewCluster). Storage: stores.go (which
// store), loghooks.go (what both stores attach), stablewrite.go (a failed
// term or vote write stops the node before hashicorp/raft, which panics on
// it, sees the error), logstore.go (badger),
// walstore.go, walcodec.go and datasync*.go (raft-wal), snapshotstore.go.
// The peer transport: transport.go, tcpstream.go and tlsstream.go (plain
// and mutual TLS), boundedconn.go and msgframe.go (bounds and sender
// checks). hclog.go routes the library's logging to zap.
//
// # Usage
//
//  1. Fill a backends.Config: ID, RaftAddr (and BindAddr if it differs),
//     DataDir, Bootstrap (all initial voters, the same on each of them) for a
//     new cluster or empty for a node that will be added, a fresh
//     core.StateMachine, and the OnApply/OnLeaderChange hooks.
//  2. Call New. It restores the latest snapshot into the state machine, and
//     Raft replays the rest of the log once a leader tells it the commit index.
//  3. Wait for OnLeaderChange(IsLeader=true) before serving writes on a node;
//     elsewhere, Propose and ReadIndex fail with *core.NotLeaderError naming
//     the leader when one is known.
//  4. Change membership on the leader with AddVoter, RemoveServer and
//     TransferLeadership.
//  5. Close the node on shutdown; it is safe to call Close twice.
//
// Example:
//
//	sm := core.NewStateMachine()
//	node, err := hashicorp.New(backends.Config{
//		ID: "n1", RaftAddr: "127.0.0.1:7101", DataDir: "data/n1",
//		Bootstrap:    []core.Member{{ID: "n1", RaftAddr: "127.0.0.1:7101"}},
//		StateMachine: sm,
//		OnLeaderChange: func(ev core.LeaderEvent) { log.Println("leader:", ev) },
//	})
//	if err != nil {
//		return err
//	}
//	defer node.Close()
//	res, err := node.Propose(ctx, core.Grant("jobs/nightly", 10_000, "worker-7"))
//
// # Errors and outcomes
//
// A proposal answered with *core.NotLeaderError before it was appended did not
// happen. One answered with it after it was appended (the leader lost its
// leadership meanwhile: hashicorp's ErrLeadershipLost), or with a ctx error,
// may still commit: callers retry idempotently (a Grant retried with the same
// owner returns the same token). A state-machine error while applying (an
// undecodable entry: core.ErrDecode) is fatal: it is logged, nothing more is
// applied, the node closes itself, and every call fails with an error that
// wraps both core.ErrStopped and the cause. So does a failed storage write
// (a full disk: badgerlog.ErrDiskFull, checked before badger's mmap'd
// writes could die of SIGBUS), a failed term or vote write included: that
// one also ends hashicorp/raft's run loop, which would otherwise panic
// (stablewrite.go); all call Config.OnFatal once. Library
// errors other than hashicorp's not-leader and shutdown ones are returned
// as a *core.NotLeaderError naming no leader (retry): callers see only
// core's errors and ctx errors.
//
// # Watermark and replay
//
// hashicorp/raft persists neither its commit index nor anything that would
// notice a log that storage shortened. The node keeps its own record, the
// watermark (internal/watermark, <DataDir>/watermark): the last index
// durably appended, written after log appends (one synced 20-byte write in
// the background, beside the next appends: watermark.File.Advance)
// and lowered synchronously before every suffix deletion, and the applied index,
// written with it and once per heartbeat interval. New refuses a log (and
// snapshot) that ends before the recorded index, naming the gap and telling
// to replace the member; Status().RecoveredCommitIndex is the recorded
// applied index, which AppliedIndex must reach again before stale reads.
//
// # Storage layout
//
// <DataDir>/raft holds the badger database (keys "hlog/"+index for the log,
// "hstable/"+key for Raft's term and vote, and badgerlog.MarkerKey naming this
// backend), or, with the wal store, <DataDir>/wal-hashicorp holds raft-wal's
// segments and its meta database (term, vote, segment list);
// <DataDir>/log_store names the store (backends.ClaimLogStore);
// <DataDir>/snapshots holds the snapshots (two kept), one directory
// <term>-<index>-<ms> each with meta.json and state.bin, as FileSnapshotStore
// lays them out and reads them; ticketd's own sink writes them, durable
// with four syncs (state.bin, meta.json, the directory under its .tmp
// name, snapshots/ after the rename: snapshotSink) where FileSnapshotStore's
// takes five and leaves the directory's own entries unsynced.
// A snapshot is taken once backends.SnapshotDue says one is due (at least
// SnapshotThreshold entries and as many bytes of entry data as the last
// snapshot since it; hashicorp's own entry-count check is off), and the log
// is then compacted down to TrailingLogs entries (on the wal store, in
// memory until the compacted prefix covers a whole segment, the only thing
// raft-wal frees on disk: walStore.DeleteRange).
package hashicorp
