package server

import (
	"context"
	"path/filepath"
	"time"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/fakeclock"
	"github.com/ticketd/ticketd/server/internal/memraft"
)

// This file is the harness's restart step: the node stops as after kill -9
// and a new process starts on the same data dir, replays the log the old one
// applied (memraft.Recover) at the current fake time and follows until a
// promote (a TransferLeader to it, or an election it wins). The apply-time
// record (applytime) lives in the data dir on a host clock that runs with
// the fake clock, as the host's monotonic clock runs across a real restart.

// harnessHost is the host clock of the harness: the fake clock's time since
// the harness started, in one epoch that every restart shares.
type harnessHost struct {
	clock *fakeclock.Clock
	start time.Time
}

func (harnessHost) Epoch() (string, error) { return "harness", nil }

func (c harnessHost) Since() (time.Duration, error) { return c.clock.Now().Sub(c.start), nil }

// newNode builds the harness's node over the memraft open returns;
// recovered says its data dir holds the log of an earlier run (a restart),
// so its apply-time record is kept.
func (h *harness) newNode(recovered bool, open func(backends.Config) (*memraft.Node, error)) (*Node, error) {
	cfg := config.DefaultConfig()
	cfg.ID = "n1"
	cfg.APIAddr = "127.0.0.1:1"
	cfg.RaftAddr = "127.0.0.1:2"
	cfg.DataDir = filepath.Join(h.dir, "n1")
	cfg.Lease.MinMS = 10
	return New(cfg, WithClock(h.clock),
		withApplyTimes(harnessHost{h.clock, h.start}, func(string) bool { return recovered }),
		WithBackend(func(bc backends.Config) (Backend, error) {
			// The apply event is recorded before the node's own hook runs: that
			// hook kicks waiters, whose proposals must print after the apply
			// that caused them (memraft's apply hook would run after it, racing
			// with them).
			nodeApply := bc.OnApply
			bc.OnApply = func(index uint64, cmd core.Command, res core.Result) {
				if h.observe.Load() {
					h.onApply(index, cmd, res)
				}
				nodeApply(index, cmd, res)
			}
			m, err := open(bc)
			h.mem = m
			return orderedMem{m, h}, err
		}))
}

// restart stops the node and starts another on the same data dir from the
// entries the old one applied: every client call in flight goes unanswered
// (its connection died with the process); the new node replays the log now,
// unobserved (its entries applied before), and is a follower of the same
// term with no leader known.
func (h *harness) restart() error {
	entries := h.mem.Entries()
	term := h.mem.Status().Term
	h.mu.Lock()
	for _, name := range h.opOrder {
		if op := h.ops[name]; !op.done {
			op.gone = true
			op.cancel()
		}
	}
	h.mu.Unlock()
	h.observe.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.n.Close(ctx); err != nil {
		return err
	}
	n, err := h.newNode(true, func(bc backends.Config) (*memraft.Node, error) { return memraft.Recover(bc, entries, term) })
	if err != nil {
		return err
	}
	h.n = n
	h.mem.HoldProposals(h.holdProposals)
	h.mem.HoldReads(h.holdReads)
	h.settle()
	h.mem.SetProposeHook(h.onPropose)
	h.observe.Store(true)
	h.mu.Lock()
	h.restarted = true
	h.event("restarted: replayed %d entries, follower of term %d", len(entries), term)
	h.mu.Unlock()
	return nil
}

// hold sets memraft's step-by-step mode: proposals wait in the log for
// commit and apply, and (reads) reads for confirm. A restart keeps it.
func (h *harness) hold(proposals, reads bool) {
	h.holdProposals, h.holdReads = proposals, reads
	h.mem.HoldProposals(proposals)
	h.mem.HoldReads(reads)
}

// committedWaiting reports whether committed entries wait to apply.
func (h *harness) committedWaiting() bool {
	for _, e := range h.mem.Log() {
		if e.Committed {
			return true
		}
	}
	return false
}
