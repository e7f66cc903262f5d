package server

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/lessor"
)

// This file connects the replicated lock table to the node-local state: the
// apply hook that keeps the lessor (on every node) and the wait queues in
// step with it, and
// the lessor's Expire proposals, and the helpers of proposals the node makes
// on its own (ghost releases, member addresses).

// onApply is the backend's OnApply hook: it keeps the lessor's leases and
// lock-delays and the wait queues in step with the lock table, on every node
// (docs/design.md#leases: every node measures every lease from its own apply).
// It never blocks and never proposes. It first records that this node
// applied index now (applytime), so that after a restart the lessor
// measures this entry's lease from now rather than from the replay.
//
//   - a Grant that created a lock, an idempotent retry Grant (which restarts
//     the lease in the replicated state) and a Renew restart the lock's
//     deadline at now + lease_ms, with this entry's index as the seen index
//     a later Expire carries; a Grant under a session
//     (docs/design.md#sessions) instead attaches the holder to its session,
//     which times it;
//   - a CreateSession and a KeepAliveSession restart the session's deadline
//     at now + ttl the same way;
//   - a RenewBatch does, for each of its renewals, what that renewal's
//     KeepAliveSession or Renew would (core.EachRenewal);
//   - a Release, and an Expire that removed its lock, untrack it; an Expire
//     that did not (Existed false: the lock was renewed after the leader
//     decided) leaves the renewed lock alone;
//   - an Expire that removed a lock with a lock-delay starts the delay now;
//   - a session's end (CloseSession, or an ExpireSession that ended it)
//     untracks the session and every holder under it, wakes their keys'
//     waiters and starts the lock-delays it recorded.
//
// A gap in the indexes is normal (a leader's no-op, an empty entry of a new
// term and configuration entries never reach this hook) and costs nothing;
// only a table replaced by a snapshot restore that onRestore did not see
// makes the lessor reconcile with it (lessor.Resync compares
// core.StateMachine.Restores; docs/design.md#replicated-commands), so the
// apply of an entry costs the same whatever the table's size.
func (n *Node) onApply(index uint64, cmd core.Command, res core.Result) {
	n.times.Applied(index)
	n.hub.Apply(index, cmd, res)
	n.lessor.Resync(n.sm)
	if cmd.Op == core.OpRenewBatch {
		core.EachRenewal(cmd, res, func(cmd core.Command, res core.Result) { n.track(index, cmd, res) })
		return
	}
	n.track(index, cmd, res)
}

// track keeps the lessor and the wait queues in step with one applied
// command (onApply; a RenewBatch's renewals one by one).
func (n *Node) track(index uint64, cmd core.Command, res core.Result) {
	switch cmd.Op {
	case core.OpGrant:
		switch {
		case res.Outcome != core.OutcomeGranted:
		case res.Session != 0:
			n.lessor.TrackUnder(cmd.Key, res.Token, res.Session)
		default:
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
		n.lessor.Removed(cmd.Key, cmd.Token) // and its ghost mark, if any
		if cmd.Op == core.OpExpire {
			n.lessor.Delay(cmd.Key, res.LockDelayMS)
		}
		n.queue.Kick(cmd.Key)
	case core.OpCreateSession, core.OpKeepAliveSession:
		if res.Outcome == core.OutcomeSessionCreated || res.Outcome == core.OutcomeRenewed {
			n.lessor.TrackSession(res.Session, res.LeaseMS, index)
		}
	case core.OpCloseSession, core.OpExpireSession:
		if res.Ended != nil {
			n.sessionEnded(res.Session, res.Ended)
		}
	}
}

// sessionEnded keeps the node-local state in step with the end of session id
// (one entry removed every holder in end): the lessor forgets the session
// and its holders, ghosts among them are cleared, the lock-delays the end
// recorded start now, and every key it touched wakes its waiters (once per
// key; end.Locks come in key order).
func (n *Node) sessionEnded(id uint64, end *core.SessionEnd) {
	n.lessor.SessionEnded(id)
	for _, d := range end.Delays {
		n.lessor.Delay(d.Key, d.LockDelayMS)
	}
	for i, lk := range end.Locks {
		n.lessor.Removed(lk.Key, lk.Token) // and its ghost mark, if any
		if i+1 == len(end.Locks) || end.Locks[i+1].Key != lk.Key {
			n.queue.Kick(lk.Key)
		}
	}
}

// onRestore is the backend's OnRestore hook: the state machine was replaced
// by a snapshot at index (installed from the leader after this node lagged
// behind a compaction, or the local one at open), so the entries up to index
// never reached onApply. The watch hub drops its history and ends every
// watcher with a *watch.CompactedError (OutOfRange: the client relists and
// resumes, never misses an event silently), and the lessor reconciles with
// the restored table (a lock it did not track starts at now + lease_ms, later
// than any client's deadline, or from this node's earlier apply of its last
// Grant/Renew: lessor.Config.AppliedAt). At start the lessor tracks nothing,
// so that is one direct load of the table, with nothing to compare
// (lessor.Lessor.Loads). Called from the apply goroutine before the next
// onApply; it never blocks and never proposes.
func (n *Node) onRestore(index uint64) {
	n.hub.Restored(index)
	n.lessor.Reconcile(n.sm)
}

// proposeExpire is the lessor's Expire proposal: core.ExpireSeen with the
// index of the lock's last Grant/Renew the lessor applied.
func (n *Node) proposeExpire(ctx context.Context, key string, token, seen uint64) error {
	b := n.backend()
	if b == nil {
		return core.ErrStopped
	}
	due, _ := n.lessor.ExpiryDue(key, token)
	res, err := b.Propose(ctx, core.ExpireSeen(key, token, seen))
	if err == nil && res.Existed {
		late := n.expired(due)
		n.log.Debug("lease expired", zap.String("key", key), zap.Uint64("token", token),
			zap.Duration("late", late), zap.Time("office", due.Office))
	}
	return err
}

// proposeExpireSession is the lessor's ExpireSession proposal:
// core.ExpireSession with the index of the session's CreateSession or last
// KeepAliveSession the lessor applied, so a KeepAlive applied after the
// lessor decided makes the Expire a no-op (docs/design.md#sessions).
func (n *Node) proposeExpireSession(ctx context.Context, id, seen uint64) error {
	b := n.backend()
	if b == nil {
		return core.ErrStopped
	}
	due, _ := n.lessor.SessionExpiryDue(id)
	res, err := b.Propose(ctx, core.ExpireSession(id, seen))
	if err == nil && res.Existed {
		late := n.expired(due)
		n.log.Debug("session expired", zap.Uint64("session", id), zap.Int("locks", len(res.Ended.Locks)),
			zap.Duration("late", late), zap.Time("office", due.Office))
	}
	return err
}

// expired counts a lease (a lock's own or a session's) that an Expire of
// this leader removed, due as the lessor said before it was proposed
// (lessor.Lessor.ExpiryDue), and returns how late that was
// (ticketd_lease_expiry_lateness_seconds): the time from the moment the
// lease could first be expired here, by this node's final measure of it or
// its taking office, to the local apply of its Expire. Beyond one expiry
// round it is the round's own delay: a starved process, a slow disk, a
// quorum slow to answer (docs/design.md#leases).
func (n *Node) expired(due lessor.Due) time.Duration {
	late := n.lessor.Late(due)
	n.met.expired.Inc()
	n.met.expiryLateness.Observe(late.Seconds())
	return late
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
