package server

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/core"
)

// This file connects the replicated lock table to the node-local state: the
// apply hook that keeps the lessor (on every node) and the wait queues in
// step with it, and
// the lessor's Expire proposals, and the helpers of proposals the node makes
// on its own (ghost releases, member addresses).

// onApply is the backend's OnApply hook: it keeps the lessor's leases and
// lock-delays and the wait queues in step with the lock table, on every node
// (issue 15: every node measures every lease from its own apply). It never
// blocks and never proposes.
//
//   - a Grant that created a lock, an idempotent retry Grant (which restarts
//     the lease in the replicated state) and a Renew restart the lock's
//     deadline at now + lease_ms, with this entry's index as the seen index
//     a later Expire carries;
//   - a Release, and an Expire that removed its lock, untrack it; an Expire
//     that did not (Existed false: the lock was renewed after the leader
//     decided) leaves the renewed lock alone;
//   - an Expire that removed a lock with a lock-delay starts the delay now.
//
// A gap in the indexes (configuration entries, or a snapshot restored by a
// backend that did not call OnRestore) makes the lessor reconcile with the
// table.
func (n *Node) onApply(index uint64, cmd core.Command, res core.Result) {
	n.hub.Apply(index, cmd, res)
	if prev := n.lastApplied.Swap(index); prev+1 != index {
		n.lessor.Reconcile(n.sm)
	}
	switch cmd.Op {
	case core.OpGrant:
		if res.Outcome == core.OutcomeGranted {
			n.lessor.Track(cmd.Key, res.Token, res.LeaseMS, index)
		}
	case core.OpRenew:
		if res.Outcome == core.OutcomeRenewed {
			n.lessor.Track(cmd.Key, cmd.Token, res.LeaseMS, index)
		}
	case core.OpRelease, core.OpExpire:
		removed := res.Outcome == core.OutcomeReleased || (res.Outcome == core.OutcomeExpired && res.Existed)
		if !removed {
			return
		}
		n.lessor.Removed(cmd.Key, cmd.Token)
		if cmd.Op == core.OpExpire {
			n.lessor.Delay(cmd.Key, res.LockDelayMS)
		}
		n.ghostMu.Lock()
		if t, ok := n.ghosts[cmd.Key]; ok && t == cmd.Token {
			delete(n.ghosts, cmd.Key)
		}
		n.ghostMu.Unlock()
		n.queue.Kick(cmd.Key)
	}
}

// onRestore is the backend's OnRestore hook: the state machine was replaced
// by a snapshot at index (installed from the leader after this node lagged
// behind a compaction, or the local one at open), so the entries up to index
// never reached onApply. The watch hub drops its history and ends every
// watcher with a *watch.CompactedError (OutOfRange: the client relists and
// resumes, never misses an event silently), and the lessor reconciles with
// the restored table (a lock it did not track starts at now + lease_ms, later
// than any client's deadline). Called from the apply goroutine before the
// next onApply; it never blocks and never proposes.
func (n *Node) onRestore(index uint64) {
	n.hub.Restored(index)
	n.lessor.Reconcile(n.sm)
	n.lastApplied.Store(index)
}

// proposeExpire is the lessor's Expire proposal: core.ExpireSeen with the
// index of the lock's last Grant/Renew the lessor applied.
func (n *Node) proposeExpire(ctx context.Context, key string, token, seen uint64) error {
	b := n.backend()
	if b == nil {
		return core.ErrStopped
	}
	res, err := b.Propose(ctx, core.ExpireSeen(key, token, seen))
	if err == nil && res.Existed {
		n.met.expired.Inc()
		n.log.Debug("lease expired", zap.String("key", key), zap.Uint64("token", token))
	}
	return err
}

// onDelayEnd is the lessor's OnDelayEnd hook: a key's lock-delay has passed,
// so its waiters may be served.
func (n *Node) onDelayEnd(key string) {
	if q := n.queue; q != nil {
		q.Kick(key)
	}
}

// retryPause is how long a background proposal waits before it tries again.
const retryPause = 100 * time.Millisecond

// proposeDetached proposes cmd on b for the node itself, bounded by
// proposeTimeout and the node's life rather than any client's context.
func (n *Node) proposeDetached(b Backend, cmd core.Command) (core.Result, error) {
	ctx, cancel := context.WithTimeout(n.life, proposeTimeout)
	defer cancel()
	return b.Propose(ctx, cmd)
}

// pause waits d; false when the node closes first.
func (n *Node) pause(d time.Duration) bool {
	select {
	case <-n.life.Done():
		return false
	case <-time.After(d):
		return true
	}
}
