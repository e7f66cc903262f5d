package hashicorp

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends/internal/badgerlog"
	"github.com/ticketd/ticketd/backends/internal/watermark"
)

// This file is the node's watermark (docs/design.md#storage-and-recovery):
// the durable record of the log's end and the applied index, checked at
// start.

// storedLog is the watermark's view (watermark.Log) of a node's Raft stores:
// any hashicorp/raft LogStore, StableStore and SnapshotStore, so every log
// store a node can be given is checked the same way.
type storedLog struct {
	logs   raft.LogStore
	stable raft.StableStore
	snaps  raft.SnapshotStore
}

// Extent reads what the stores hold. The snapshot is the newest one that
// opens (FileSnapshotStore.Open reads it whole and checks its CRC), because
// that is the one Raft restores at start (it skips unreadable ones). The
// term is read as raft.HasExistingState reads it (a missing key is 0).
func (s storedLog) Extent() (watermark.Extent, error) {
	var e watermark.Extent
	var err error
	if e.Last, err = s.logs.LastIndex(); err != nil {
		return e, err
	}
	if e.Last > 0 {
		if e.First, err = s.logs.FirstIndex(); err != nil {
			return e, err
		}
		var l raft.Log
		if err := s.logs.GetLog(e.Last, &l); err != nil {
			return e, fmt.Errorf("read the last entry %d: %w", e.Last, err)
		}
		e.LastTerm = l.Term
	}
	metas, err := s.snaps.List()
	if err != nil {
		return e, fmt.Errorf("list snapshots: %w", err)
	}
	for _, m := range metas { // newest first
		_, rc, err := s.snaps.Open(m.ID)
		if err != nil {
			continue
		}
		_ = rc.Close()
		e.Snapshot = m.Index
		if e.Last == 0 {
			e.LastTerm = m.Term
		}
		break
	}
	if term, err := s.stable.GetUint64(keyCurrentTerm); err == nil {
		e.Term = term
	}
	return e, nil
}

// openWatermark opens the node's watermark (package watermark), refuses a
// log that ends before the index it records
// (docs/design.md#storage-and-recovery) or that has no usable watermark beside
// it (unless Config.AcceptMissingWatermark), and has store keep it up to date:
// after every durable append (a synced 20-byte write in the background,
// overlapping the next append: watermark.File.Advance) and, synchronously,
// before every suffix deletion. The mark also carries the applied index, which
// hashicorp/raft does not persist; the one read here is
// Status().RecoveredCommitIndex of this run (docs/design.md#reads). Errors: a
// *watermark.GapError (errors.Is watermark.ErrLogShortened) for a shortened
// log, a *watermark.MissingError (errors.Is watermark.ErrMissing) for a log
// without a usable watermark, or the file system's.
func (n *Node) openWatermark(store nodeStore, snaps raft.SnapshotStore) error {
	wm, mark, err := watermark.Open(n.cfg.DataDir, storedLog{logs: store, stable: store, snaps: snaps},
		watermark.Options{AcceptMissing: n.cfg.AcceptMissingWatermark, Logger: n.logger})
	if err != nil {
		n.logger.Error("raft log cannot be trusted; refusing to start", zap.Error(err))
		return fmt.Errorf("hashicorp: data dir %s: %w", n.cfg.DataDir, err)
	}
	n.wm, n.recovered = wm, mark.Applied
	h := store.hooks()
	h.wm, h.applied = wm, n.sm.AppliedIndex
	h.fatal = func(err error) { _ = n.fail(err) }
	return nil
}

// recordApplied durably raises the mark's applied index to the state
// machine's, so that a node killed while idle still knows how far it had
// applied (appends record it too, but only as of the batch before). Called
// once per heartbeat interval: at most one synced 20-byte write per
// interval, none while nothing is applied. A failed write stops the node.
func (n *Node) recordApplied() {
	if n.wm == nil || n.fatalErr() != nil {
		return
	}
	if err := n.wm.RaiseApplied(n.sm.AppliedIndex()); err != nil && !errors.Is(err, watermark.ErrClosed) {
		_ = n.fail(fmt.Errorf("hashicorp: watermark: %w", badgerlog.DiskFull(err)))
	}
}

// closeWatermark records the final applied index (never lowering the one
// recorded: a node closed while replaying is still behind it) and closes the
// watermark; Raft is shut down, so the log store no longer writes.
func (n *Node) closeWatermark() error {
	if n.wm == nil {
		return nil
	}
	var err error
	if n.fatalErr() == nil {
		err = n.wm.RaiseApplied(n.sm.AppliedIndex())
	}
	return errors.Join(err, n.wm.Close())
}
