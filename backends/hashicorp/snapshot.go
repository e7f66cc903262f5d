package hashicorp

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// This file decides when the node takes a snapshot, and so compacts its log
// down to TrailingLogs: applied, which the FSM calls after every batch, asks
// for one as soon as SnapshotThreshold entries were applied since the last
// (besides hashicorp's own periodic check), and wakes the waits of read.go.

// applied is called by the FSM after each batch: it wakes waiters and
// triggers a snapshot once SnapshotThreshold entries were applied since the
// last one.
func (n *Node) applied() {
	n.changed()
	if a := n.sm.AppliedIndex(); a >= n.lastSnap.Load()+n.cfg.SnapshotThreshold {
		select {
		case n.snapCh <- struct{}{}:
			n.lastSnap.Store(a)
		default:
		}
	}
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
		if err == nil && n.cfg.Observer != nil {
			n.observeSnapshot(f, time.Since(start))
		}
	}
}

// observeSnapshot reports a snapshot this node took to Config.Observer,
// with its size from the snapshot store's metadata.
func (n *Node) observeSnapshot(f raft.SnapshotFuture, d time.Duration) {
	meta, rc, err := f.Open()
	if err != nil {
		return
	}
	_ = rc.Close()
	n.cfg.Observer.SnapshotTaken(meta.Size, d)
}
