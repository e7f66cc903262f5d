package etcd

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
)

// snapshotJob is what the loop hands the snapshot goroutine: a
// point-in-time copy of everything a snapshot at index holds, so the loop
// goes on applying while it is encoded and written.
type snapshotJob struct {
	index, term uint64
	compactTo   uint64
	confState   *pb.ConfState
	book        addressBook    // a copy: the loop changes its own in place
	sm          *core.Snapshot // copy-on-write, O(1) to take
}

// snapshotResult is what the snapshot goroutine reports back to the loop.
type snapshotResult struct {
	index uint64
	bytes int
	took  time.Duration
	err   error
}

// maybeSnapshot starts a snapshot of the state machine at the applied index
// when backends.SnapshotDue says one is due (or a node was just added, so
// the snapshot a joining node receives names it) and none is being
// written. It takes the state machine's copy-on-write copy
// (core.StateMachine.Snapshot, O(1)) on the loop and leaves the encoding,
// the write and the log compaction (keeping TrailingLogs entries) to a
// goroutine of its own, as hashicorp/raft persists an FSMSnapshot beside
// its FSM and etcd's server snapshots beside its raft loop: the loop never
// waits for a snapshot of the whole table, so commits and applies go on
// while one is written. The result comes back on snapc (onSnapshotDone).
func (n *Node) maybeSnapshot() error {
	if n.snapping || n.applied <= n.snapIndex {
		return nil
	}
	if !n.forceSnap && !backends.SnapshotDue(n.applied-n.snapIndex, n.logBytes, n.snapBytes, n.cfg.SnapshotThreshold) {
		return nil
	}
	term, err := n.store.Term(n.applied)
	if err != nil {
		return fmt.Errorf("etcd: snapshot at %d: %w", n.applied, err)
	}
	job := snapshotJob{
		index: n.applied, term: term,
		confState: proto.Clone(n.confState).(*pb.ConfState),
		book:      maps.Clone(n.book),
		sm:        n.sm.Snapshot(),
	}
	if n.applied > n.cfg.TrailingLogs {
		job.compactTo = n.applied - n.cfg.TrailingLogs
	}
	n.forceSnap, n.snapping, n.logBytes = false, true, 0
	n.snapWG.Add(1)
	go n.writeSnapshot(job)
	return nil
}

// writeSnapshot encodes the job's copy and records it in the log store,
// which compacts the log once the snapshot is durable; it reports to the
// loop on snapc (buffered: one snapshot at a time, so it never blocks).
// It runs while the loop goes on: the store's CreateSnapshot holds no lock
// that Save needs while it writes the snapshot (raftstore, walstore).
func (n *Node) writeSnapshot(j snapshotJob) {
	defer n.snapWG.Done()
	start := time.Now()
	if hook := n.snapshotHook.Load(); hook != nil {
		(*hook)(j.index)
	}
	data, err := encodeSnapshotData(j.book, j.sm)
	if err == nil {
		snap := &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{
			Index: new(j.index), Term: new(j.term), ConfState: j.confState,
		}}
		err = n.store.CreateSnapshot(snap, j.compactTo)
	}
	took := time.Since(start)
	n.log.Debug("snapshot", zap.Uint64("index", j.index), zap.Uint64("compacted_to", j.compactTo),
		zap.Int("bytes", len(data)), zap.Duration("took", took), zap.Error(err))
	n.snapc <- snapshotResult{index: j.index, bytes: len(data), took: took, err: err}
}

// onSnapshotDone takes the snapshot goroutine's result on the loop. A
// snapshot that a newer one from the leader overtook (raft.ErrSnapOutOfDate:
// the node installed it while this one was written) is dropped; any other
// failure is a storage failure, fatal (docs/design.md#storage-and-recovery).
func (n *Node) onSnapshotDone(r snapshotResult) error {
	n.snapping = false
	if errors.Is(r.err, raft.ErrSnapOutOfDate) {
		n.log.Debug("snapshot overtaken by one from the leader", zap.Uint64("index", r.index), zap.Error(r.err))
		return nil
	}
	if r.err != nil {
		return fmt.Errorf("etcd: snapshot at %d: %w", r.index, r.err)
	}
	if r.index > n.snapIndex {
		n.snapIndex, n.snapBytes = r.index, uint64(r.bytes)
	}
	if n.cfg.Observer != nil {
		n.cfg.Observer.SnapshotTaken(int64(r.bytes), r.took)
	}
	return n.maybeSnapshot()
}
