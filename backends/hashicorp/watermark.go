package hashicorp

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/backends/internal/badgerlog"
	"github.com/ticketd/ticketd/backends/internal/watermark"
)

// openWatermark opens the node's watermark (package watermark), refuses a
// log that ends before the index it records (issue 14, item 7), and has
// store keep it up to date: after every durable append (a synced 20-byte
// write in the background, overlapping the next append: watermark.File.Advance,
// issue 21) and, synchronously, before every suffix deletion. The mark also
// carries the applied index, which hashicorp/raft does not persist; the one
// read here is Status().RecoveredCommitIndex of this run (issue 14, item 6).
// Errors: a *watermark.GapError (errors.Is watermark.ErrLogShortened) for a
// shortened log, watermark.ErrCorrupt, or the file system's.
func (n *Node) openWatermark(store *logStore, snaps raft.SnapshotStore) error {
	wm, mark, err := watermark.Open(n.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("hashicorp: %w", err)
	}
	last, _ := store.LastIndex()
	metas, err := snaps.List()
	if err != nil {
		_ = wm.Close()
		return fmt.Errorf("hashicorp: list snapshots: %w", err)
	}
	if len(metas) > 0 && metas[0].Index > last {
		last = metas[0].Index // newest first
	}
	if err := watermark.Check(mark, last); err != nil {
		_ = wm.Close()
		n.logger.Error("damaged raft log; refusing to start")
		return fmt.Errorf("hashicorp: data dir %s: %w", n.cfg.DataDir, err)
	}
	n.wm, n.recovered = wm, mark.Applied
	store.wm, store.applied = wm, n.sm.AppliedIndex
	store.fatal = func(err error) { _ = n.fail(err) }
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
