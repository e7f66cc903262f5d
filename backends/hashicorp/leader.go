package hashicorp

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/core"
)

// This file follows leadership: a new leader's barrier, and the
// OnLeaderChange events delivered in order from one goroutine.

// barrierData is the encoded core.Noop a new leader commits before it reports
// itself ready.
var barrierData = func() []byte {
	b, err := core.Encode(core.Noop())
	if err != nil {
		panic(err)
	}
	return b
}()

// runLeadership follows leadership changes and delivers OnLeaderChange events
// in order from this one goroutine. hashicorp's observations only wake it
// (they may be dropped when the channel is full); it then reads the current
// state, and it also polls once per heartbeat interval, so no change is missed
// for long.
//
// On becoming leader it first commits and applies a barrier of its new term
// and only then reports IsLeader=true (docs/design.md#the-consensus-contract;
// Raft thesis §6.4). The barrier is a core.Noop command rather than
// raft.Barrier: hashicorp's LogBarrier never reaches the FSM, so only a
// command makes the state machine's AppliedIndex prove that everything before
// it was applied.
func (n *Node) runLeadership() {
	defer n.wg.Done()
	tick := time.NewTicker(n.cfg.HeartbeatInterval)
	defer tick.Stop()
	var last core.LeaderEvent
	for {
		select {
		case <-n.stopCh:
			return
		case <-n.fatalCh:
			// Stop Raft (no more appends, votes or heartbeats) but leave
			// badger open: closing it flushes its memtable into a new
			// table, which on a full disk dies of SIGBUS inside badger's
			// mmap and leaves a partial table. The process exits instead
			// (fail-stop); every acknowledged entry is already synced, as
			// after kill -9. An in-process owner still calls Close.
			// halt waits for in-flight calls, so it runs on its own.
			go func() { _ = n.halt() }()
			continue
		case <-n.obsCh:
		case <-tick.C:
			n.recordApplied()
		}
		last = n.reconcile(last)
	}
}

// reconcile compares the current leadership with the last delivered event,
// delivers what changed, and returns the new last event.
func (n *Node) reconcile(last core.LeaderEvent) core.LeaderEvent {
	for {
		select {
		case <-n.stopCh:
			return last
		default:
		}
		term := n.raft.CurrentTerm()
		addr, id := n.raft.LeaderWithID()
		if n.raft.State() != raft.Leader || string(id) != n.cfg.ID {
			n.readyTerm.Store(0)
			ev := core.LeaderEvent{Leader: core.Member{ID: string(id), RaftAddr: string(addr)}, Term: term}
			if last.IsLeader || ev.Leader != last.Leader {
				last = n.emit(ev)
			}
			return last
		}
		if last.IsLeader && last.Term == term {
			return last
		}
		if last.IsLeader {
			// Leadership was lost and regained between two looks: report the
			// loss before the new term's readiness.
			last = n.emit(core.LeaderEvent{Term: term})
		}
		if _, err := n.apply(context.Background(), barrierData); err != nil {
			if errors.Is(err, core.ErrStopped) {
				return last
			}
			n.logger.Debug("leader barrier failed", zap.Uint64("term", term), zap.Error(err))
			// Still leader but the barrier was refused (a transfer in
			// progress, for example): look again a little later.
			select {
			case <-n.stopCh:
			case <-time.After(n.cfg.HeartbeatInterval):
			}
			continue
		}
		if n.raft.State() != raft.Leader || n.raft.CurrentTerm() != term {
			continue
		}
		n.readyTerm.Store(term)
		return n.emit(core.LeaderEvent{IsLeader: true, Leader: n.self, Term: term})
	}
}

// emit delivers ev to OnLeaderChange and wakes waiters (ReadIndex).
func (n *Node) emit(ev core.LeaderEvent) core.LeaderEvent {
	n.logger.Debug("leadership change", zap.Bool("leader", ev.IsLeader), zap.String("leader_id", ev.Leader.ID), zap.Uint64("term", ev.Term))
	if n.cfg.OnLeaderChange != nil {
		n.cfg.OnLeaderChange(ev)
	}
	n.changed()
	return ev
}
