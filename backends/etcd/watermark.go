package etcd

import (
	"errors"
	"fmt"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends/internal/badgerlog"
	"github.com/ticketd/ticketd/backends/internal/watermark"
)

// storedLog is the watermark's view (watermark.Log) of a node's Raft
// storage: any etcd raft.Storage, so every log store a node can be given is
// checked the same way.
type storedLog struct{ s raft.Storage }

// Extent reads what the storage holds: its HardState's term, its snapshot,
// and the entries after the snapshot (raft.Storage serves the snapshot's
// index as FirstIndex-1, and its term through Term).
func (l storedLog) Extent() (watermark.Extent, error) {
	var e watermark.Extent
	hs, _, err := l.s.InitialState()
	if err != nil {
		return e, err
	}
	e.Term = hs.GetTerm()
	snap, err := l.s.Snapshot()
	if err != nil && !errors.Is(err, raft.ErrSnapshotTemporarilyUnavailable) {
		return e, err
	}
	e.Snapshot = snap.GetMetadata().GetIndex()
	first, err := l.s.FirstIndex()
	if err != nil {
		return e, err
	}
	last, err := l.s.LastIndex()
	if err != nil {
		return e, err
	}
	if last >= first && last > 0 {
		e.First, e.Last = first, last
	}
	if e.LastTerm, err = l.s.Term(max(last, e.Snapshot)); err != nil && max(last, e.Snapshot) > 0 {
		return e, fmt.Errorf("term of index %d: %w", max(last, e.Snapshot), err)
	}
	return e, nil
}

// openWatermark opens the node's watermark (package watermark) and refuses a
// log that ends before the index it records
// (docs/design.md#storage-and-recovery), or one with no usable watermark
// beside it unless Config.AcceptMissingWatermark: badger drops the tail of a
// damaged memtable write-ahead log without an error, and raftstore's own
// checks (gaps, HardState past the log) cannot see a log that is merely
// shorter. It runs before anything writes Raft state (bootstrap,
// ForceNewCluster), so a new data dir is told apart from a damaged one. It
// sets recovered to the applied index the mark records; open raises it to the
// HardState's Commit (Status().RecoveredCommitIndex, docs/design.md#reads: the
// stored Commit is a lower bound that only reaches the disk with a term or
// vote change, a snapshot or Close). Errors: a *watermark.GapError (errors.Is
// watermark.ErrLogShortened) or a *watermark.MissingError (errors.Is
// watermark.ErrMissing), both also wrapping ErrCorrupt; or the file system's.
func (n *Node) openWatermark() error {
	wm, mark, err := watermark.Open(n.cfg.DataDir, storedLog{s: n.store},
		watermark.Options{AcceptMissing: n.cfg.AcceptMissingWatermark, Logger: n.log})
	if errors.Is(err, watermark.ErrLogShortened) || errors.Is(err, watermark.ErrMissing) {
		n.log.Error("raft log cannot be trusted; refusing to start", zap.Error(err))
		return fmt.Errorf("etcd: data dir %s: %w: %w", n.cfg.DataDir, ErrCorrupt, err)
	}
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	n.wm = wm
	n.recovered = mark.Applied
	return nil
}

// lowerWatermark lowers the recorded end of the log, durably, before a Save
// that overwrites a suffix of it (a follower dropping conflicting entries),
// so that a crash during the Save never leaves the mark past the log's end.
//
// Entries that only extend the log (the first follows the stored log's
// last) overwrite nothing: the mark, written or pending, is at most the
// stored log's end (raiseWatermark records it after each Save; a lowering
// goes through here first), so nothing is written. Calling Update then would
// only have written the pending Advance synchronously, in the Ready loop,
// before every Save under load: one more synced write per append, which
// the background writer exists to overlap with the next Save.
func (n *Node) lowerWatermark(ents []*pb.Entry) error {
	if len(ents) == 0 || ents[0].GetIndex() == 0 {
		return nil
	}
	first := ents[0].GetIndex()
	if last, _ := n.store.LastIndex(); first > last {
		return nil
	}
	return n.updateWatermark(func(m watermark.Mark) watermark.Mark {
		m.LastIndex = min(m.LastIndex, first-1)
		return m
	})
}

// raiseWatermark records the end of the log after a Save made it durable,
// and the applied index, in the background (watermark.File.Advance): the
// synced 20-byte write overlaps the next Ready's Save instead of adding to
// this one's latency. It waits for no disk.
func (n *Node) raiseWatermark() error {
	last, _ := n.store.LastIndex()
	if err := n.wm.Advance(last, n.applied); err != nil {
		return fmt.Errorf("etcd: watermark: %w", badgerlog.DiskFull(err))
	}
	return nil
}

// recordApplied raises the mark's applied index, once per tick, so that a
// node killed while idle still knows how far it had applied (a Save records
// it too, but only as of the Ready before). The write happens in the
// background (watermark.File.AdvanceApplied), at most one synced 20-byte
// write per heartbeat interval, none while nothing is applied.
func (n *Node) recordApplied() error {
	if err := n.wm.AdvanceApplied(n.applied); err != nil {
		return fmt.Errorf("etcd: watermark: %w", badgerlog.DiskFull(err))
	}
	return nil
}

func (n *Node) updateWatermark(change func(watermark.Mark) watermark.Mark) error {
	if err := n.wm.Update(change); err != nil {
		return fmt.Errorf("etcd: watermark: %w", badgerlog.DiskFull(err))
	}
	return nil
}

// closeWatermark records the final applied index (never lowering the one
// recorded: a node closed while replaying is still behind it) and closes the
// watermark; the loop has exited.
func (n *Node) closeWatermark() error {
	if n.wm == nil {
		return nil
	}
	n.mu.RLock()
	failed := n.fatal != nil
	n.mu.RUnlock()
	var err error
	if !failed && n.rn != nil {
		err = n.wm.RaiseApplied(n.applied)
	}
	return errors.Join(err, n.wm.Close())
}
