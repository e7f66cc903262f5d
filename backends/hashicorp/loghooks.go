package hashicorp

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ticketd/ticketd/backends/internal/badgerlog"
	"github.com/ticketd/ticketd/backends/internal/watermark"
)

// This file is what both Raft log stores attach to their writes: the
// watermark at the log's end, the fail-stop on a failed write, and the
// append timings.

// logHooks is what a node attaches to its Raft log store, whichever store
// it is (badger's logStore, raft-wal's walStore): the watermark kept at the
// log's end, the fail-stop on a failed write, and the append timings.
type logHooks struct {
	// wm, when set, records the log's end after every append (in the
	// background, watermark.File.Advance) and durably before every suffix
	// deletion (see package watermark); applied reports the state machine's
	// applied index recorded with it.
	wm      *watermark.File
	applied func() uint64
	// fatal, when set, is told of every failed write: the store no longer
	// knows what is on disk, so the node must stop (fail-stop,
	// docs/design.md#storage-and-recovery).
	fatal func(error)
	// observe, when set, is told of every durable append (entries, time).
	observe func(entries int, d time.Duration)
	// raftRuns is set just before raft.NewRaft: from then on every stable
	// write comes from hashicorp/raft's run loop, and a failed one ends that
	// goroutine instead of returning (stableFailed).
	raftRuns atomic.Bool
}

// mark durably records last as the log's end (with the applied index) in the
// watermark, when there is one, before it returns: for lowering it before a
// suffix is deleted.
func (h *logHooks) mark(last uint64) error {
	if h.wm == nil {
		return nil
	}
	applied := h.appliedIndex()
	err := h.wm.Update(func(m watermark.Mark) watermark.Mark {
		// Applied is never lowered: a replaying node is behind it.
		return watermark.Mark{LastIndex: last, Applied: max(m.Applied, applied)}
	})
	if err != nil {
		return h.failed(fmt.Errorf("store logs: %w", err))
	}
	return nil
}

// advance records last, just made durable, as the log's end in the
// watermark, when there is one, without waiting for the watermark's own
// write (watermark.File.Advance: it overlaps the next append's sync, so an
// append costs the store's sync alone).
func (h *logHooks) advance(last uint64) error {
	if h.wm == nil {
		return nil
	}
	if err := h.wm.Advance(last, h.appliedIndex()); err != nil {
		return h.failed(fmt.Errorf("store logs: %w", err))
	}
	return nil
}

func (h *logHooks) appliedIndex() uint64 {
	if h.applied == nil {
		return 0
	}
	return h.applied()
}

// failed reports err to fatal (a write whose outcome on disk is unknown) and
// returns it, annotated when the disk is full.
func (h *logHooks) failed(err error) error {
	err = badgerlog.DiskFull(err)
	if h.fatal != nil {
		h.fatal(err)
	}
	return err
}

// timed calls observe, when set, with the entries of an append that
// started at start.
func (h *logHooks) timed(entries int, start time.Time) {
	if h.observe != nil {
		h.observe(entries, time.Since(start))
	}
}

// hooks returns h, so that code holding any nodeStore reaches its hooks.
func (h *logHooks) hooks() *logHooks { return h }
