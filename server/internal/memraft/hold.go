package memraft

import (
	"context"
	"fmt"

	"github.com/ticketd/ticketd/core"
)

// This file is memraft's step-by-step mode, for scripts that interleave
// proposals, commits, applies, reads and leadership changes by hand (the
// server's interaction tests). With HoldProposals, Propose appends its command
// to the log and waits: Commit marks log entries committed, Apply applies
// committed ones, in log order. With HoldReads, ReadIndex and ConfirmTerm wait
// for Confirm. A read also waits, held or not, until every entry committed
// when it was called has applied (Raft thesis §6.4).

// LogEntry is one entry of the log that has not applied yet, as Log shows it.
type LogEntry struct {
	// Term is the term the entry was appended in.
	Term uint64
	// Cmd is the proposed command.
	Cmd core.Command
	// Committed is true once Commit reached the entry.
	Committed bool
}

// entry is one appended, not yet applied proposal.
type entry struct {
	LogEntry
	data     []byte
	done     chan proposed // buffered: one answer
	answered bool          // done was sent to (n.mu held)
}

type proposed struct {
	res core.Result
	err error
}

// wait returns the entry's answer, or ctx.Err() when the caller gives up
// first (the entry stays in the log and may still apply, as in a real backend).
func (e *entry) wait(ctx context.Context) (core.Result, error) {
	select {
	case p := <-e.done:
		return p.res, p.err
	case <-ctx.Done():
		return core.Result{}, ctx.Err()
	}
}

// heldRead is one ReadIndex or ConfirmTerm call waiting for its answer.
type heldRead struct {
	target uint64 // commit index at the call: answered once applied >= target
	done   chan confirmed
}

type confirmed struct {
	term uint64
	err  error
}

func (r *heldRead) wait(ctx context.Context) (uint64, error) {
	select {
	case c := <-r.done:
		return c.term, c.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// HoldProposals switches step-by-step proposals on or off. Switching off
// commits and applies everything in the log first.
func (n *Node) HoldProposals(on bool) {
	if !on {
		n.Commit(-1)
		n.Apply(-1)
	}
	n.mu.Lock()
	n.holdProposals = on
	n.mu.Unlock()
}

// HoldReads switches held reads on or off. Switching off answers every held
// read whose entries have applied.
func (n *Node) HoldReads(on bool) {
	n.mu.Lock()
	n.holdReads = on
	n.mu.Unlock()
	if !on {
		n.Confirm()
	}
}

// SetApplyHook sets fn to be called after every applied entry, after the
// backends.Config OnApply hook, on the apply path; nil removes it. fn is
// called once per command the entry carries (core.EachRenewal): a
// RenewBatch reaches it as the KeepAliveSession and Renew commands it
// stands for, each with its own Result and the entry's index, so that a
// checker sees every renewal whichever way the leader wrote it.
func (n *Node) SetApplyHook(fn func(index uint64, cmd core.Command, res core.Result)) {
	n.mu.Lock()
	n.applyHook = fn
	n.mu.Unlock()
}

// SetRecoveredCommitIndex sets what Status reports as RecoveredCommitIndex (a
// node replaying its log after a restart).
func (n *Node) SetRecoveredCommitIndex(index uint64) {
	n.mu.Lock()
	n.recovered = index
	n.mu.Unlock()
}

// Log returns the entries proposed and not yet applied, in log order.
func (n *Node) Log() []LogEntry {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]LogEntry, 0, len(n.log))
	for _, e := range n.log {
		out = append(out, e.LogEntry)
	}
	return out
}

// HeldReads returns the number of reads waiting for Confirm or for apply.
func (n *Node) HeldReads() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.reads)
}

// append adds cmd to the log when proposals are held; held is false (and
// nothing happens) otherwise.
func (n *Node) append(cmd core.Command) (e *entry, held bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.holdProposals {
		return nil, false
	}
	data, err := core.Encode(cmd)
	if err != nil {
		e = &entry{done: make(chan proposed, 1), answered: true}
		e.done <- proposed{err: err}
		return e, true
	}
	e = &entry{LogEntry: LogEntry{Term: n.term, Cmd: cmd}, data: data, done: make(chan proposed, 1)}
	n.log = append(n.log, e)
	return e, true
}

// Commit marks the next count uncommitted entries committed (all when count
// < 0) and returns how many it marked.
func (n *Node) Commit(count int) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	done := 0
	for _, e := range n.log {
		if count >= 0 && done == count {
			break
		}
		if !e.Committed {
			e.Committed = true
			done++
		}
	}
	return done
}

// Apply applies the next count committed entries in log order (all when
// count < 0), answers their proposers, and returns how many it applied.
func (n *Node) Apply(count int) int {
	done := 0
	for count < 0 || done < count {
		n.mu.Lock()
		if len(n.log) == 0 || !n.log[0].Committed {
			n.mu.Unlock()
			break
		}
		e := n.log[0]
		n.log[0] = nil
		n.log = n.log[1:]
		n.mu.Unlock()
		res, err := n.apply(e.Cmd)
		n.mu.Lock()
		if !e.answered {
			e.answered = true
			e.done <- proposed{res, err}
		}
		n.mu.Unlock()
		done++
	}
	n.mu.Lock()
	hold := n.holdReads
	n.mu.Unlock()
	if !hold {
		n.Confirm()
	}
	return done
}

// failUncommitted answers the proposers of uncommitted entries with a
// *core.NotLeaderError naming leader, as a backend does when it loses
// leadership (the outcome is unknown: the entries stay in the log and apply if
// this node leads again).
func (n *Node) failUncommitted(leader core.Member) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, e := range n.log {
		if !e.Committed && !e.answered {
			e.answered = true
			e.done <- proposed{err: &core.NotLeaderError{Leader: leader}}
		}
	}
}

// committedLocked counts committed, not yet applied entries; n.mu held.
func (n *Node) committedLocked() int {
	c := 0
	for _, e := range n.log {
		if e.Committed {
			c++
		}
	}
	return c
}

// queueRead queues a read when reads are held or committed entries wait to
// apply; held is false otherwise (answer at once).
func (n *Node) queueRead() (r *heldRead, held bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	pending := n.committedLocked()
	if !n.holdReads && pending == 0 {
		return nil, false
	}
	r = &heldRead{target: n.index + uint64(pending), done: make(chan confirmed, 1)}
	n.reads = append(n.reads, r)
	return r, true
}

// Confirm answers every held read whose committed entries have applied: with
// the current term when this node leads, else a *core.NotLeaderError.
func (n *Node) Confirm() {
	applied := n.cfg.StateMachine.AppliedIndex()
	n.mu.Lock()
	defer n.mu.Unlock()
	keep := n.reads[:0]
	for _, r := range n.reads {
		switch {
		case r.target > applied:
			keep = append(keep, r)
		case n.leader.ID != n.cfg.ID:
			r.done <- confirmed{err: &core.NotLeaderError{Leader: n.leader}}
		default:
			r.done <- confirmed{term: n.term}
		}
	}
	n.reads = keep
}

// failAll answers everything waiting with core.ErrStopped (Close).
func (n *Node) failAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, e := range n.log {
		if !e.answered {
			e.answered = true
			e.done <- proposed{err: core.ErrStopped}
		}
	}
	for _, r := range n.reads {
		r.done <- confirmed{err: core.ErrStopped}
	}
	n.log, n.reads = nil, nil
}

// Replicate applies cmd at the next index as if another leader had committed
// it and this node, a follower, applied it (OnApply runs as for any entry).
// As in Raft, the new leader's log keeps every committed entry and
// overwrites the uncommitted ones: committed entries still in this node's
// log apply first, uncommitted ones are dropped (their proposers were already
// answered by Demote). Errors: this node leads, or the state machine's.
func (n *Node) Replicate(cmd core.Command) (core.Result, error) {
	n.mu.Lock()
	leads := n.leader.ID == n.cfg.ID
	n.mu.Unlock()
	if leads {
		return core.Result{}, fmt.Errorf("memraft: replicate while leading")
	}
	n.Apply(-1)
	n.mu.Lock()
	for _, e := range n.log {
		if !e.answered {
			e.answered = true
			e.done <- proposed{err: &core.NotLeaderError{Leader: n.leader}}
		}
	}
	n.log = nil
	n.mu.Unlock()
	return n.apply(cmd)
}
