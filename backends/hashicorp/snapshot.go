package hashicorp

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
)

// This file decides when the node takes a snapshot, and so compacts its log
// down to TrailingLogs: applied, which the FSM calls after every batch, asks
// for one when backends.SnapshotDue says one is due — at least
// SnapshotThreshold entries and as many bytes of entry data as the latest
// snapshot since it (the Raft thesis' expansion-factor rule, §5.1.1), the
// rule the etcd backend follows too — and wakes the waits of read.go.
// hashicorp's own periodic check, which counts entries only, is off
// (raftConfig), so a table of a million locks is not written out again
// every SnapshotThreshold entries.

// applied is called by the FSM after each batch, with the bytes of entry
// data the batch carried: it wakes waiters, lets the log store drop what it
// kept in memory of the applied entries for a restart's reads (replayed),
// and asks runSnapshots for a snapshot once backends.SnapshotDue says one
// is due. It runs on the FSM goroutine (or New's, from Restore at start).
func (n *Node) applied(entryBytes uint64) {
	n.changed()
	logBytes := n.logBytes.Add(entryBytes)
	a, last := n.sm.AppliedIndex(), n.lastSnap.Load()
	n.store.replayed(a)
	if a <= last || !backends.SnapshotDue(a-last, logBytes, n.snapBytes.Load(), n.cfg.SnapshotThreshold) {
		return
	}
	select {
	case n.snapCh <- struct{}{}:
		n.lastSnap.Store(a)
		n.logBytes.Store(0)
	default:
	}
}

// restored records a snapshot that was restored into the state machine (one
// installed from the leader, or this node's own at start), snapBytes long,
// as the latest one: the next is due by SnapshotDue against its size,
// counting the log applied after it (at start, the log replayed after it).
func (n *Node) restored(snapBytes uint64) {
	n.lastSnap.Store(n.sm.AppliedIndex())
	n.snapBytes.Store(snapBytes)
	n.logBytes.Store(0)
	n.applied(0)
}

// runSnapshots takes a snapshot (and so compacts the log down to
// TrailingLogs) whenever applied() asks for one.
func (n *Node) runSnapshots() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stopCh:
			return
		case <-n.snapCh:
		}
		start := time.Now()
		f := n.raft.Snapshot()
		err := f.Error()
		if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) && !errors.Is(err, raft.ErrRaftShutdown) {
			n.logger.Warn("snapshot failed", zap.Error(err))
		}
		if err == nil {
			n.tookSnapshot(f, time.Since(start))
		}
	}
}

// tookSnapshot records the size of a snapshot this node took, from the
// snapshot store's metadata, for SnapshotDue, and reports it to
// Config.Observer.
func (n *Node) tookSnapshot(f raft.SnapshotFuture, d time.Duration) {
	meta, rc, err := f.Open()
	if err != nil {
		n.logger.Warn("snapshot taken but not readable", zap.Error(err))
		return
	}
	_ = rc.Close()
	n.snapBytes.Store(uint64(max(meta.Size, 0)))
	if n.cfg.Observer != nil {
		n.cfg.Observer.SnapshotTaken(meta.Size, d)
	}
}
