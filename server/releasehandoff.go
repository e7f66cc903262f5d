package server

import (
	"context"

	"github.com/ticketd/ticketd/core"
)

// This file is the pipelined handoff (docs/design.md#handoff): a client's
// Release of an exclusive lock (core.ModeExclusive, limit 0) that has waiters
// hands the turn to the head waiter as the Release is proposed, so that the
// waiter's Grant follows the Release in the log and both commit together: a
// handoff costs one commit instead of two (the Release applying, then the
// Grant proposed). The state machine decides: a Grant that applies while the
// key is still held is GrantRejected, nothing changes, and the waiter goes
// back to the head of the queue (waitq.Turn.Requeue); a Grant whose waiter
// left meanwhile is a ghost and is released as any other (grant.go).
//
// The Release is submitted (core.Submitter, part of every backend's
// core.Consensus), whose Submit returns once the Release is queued for the
// log ahead of every later proposal: the turn is handed out only then, so
// the Grant can enter the log only behind the Release. A leadership change
// may drop the Release and still let the Grant commit in a later term; the
// Grant is then rejected and its waiter requeued.
//
// Shared keys and semaphores keep the two-step handoff: the
// Release applies, then the apply hook's Kick serves every waiter whose
// grant fits beside the holders left (several shared waiters together).

// proposeRelease proposes Release{lk.Key, lk.Token} for a client (or an
// admin's force) and, when the key has waiters, hands the turn to the head
// waiter as the Release is proposed (waitq.Queue.Handoff). Not when the lock
// asked for a lock-delay: an Expire of it that applies before the Release
// would hold the key back, and the Grant behind would apply during the delay.
// Only for an exclusive lock (core.ModeExclusive, limit 0): a Release of a
// shared or semaphore holder is two-step (it applies, then the apply hook's
// Kick serves every waiter whose grant then fits, several shared ones at
// once), since which waiters fit depends on the holders the Release leaves.
// Errors: core.Consensus.Propose's.
func (n *Node) proposeRelease(ctx context.Context, lk core.Lock) (core.Result, error) {
	cmd := core.Release(lk.Key, lk.Token)
	if lk.LockDelayMS != 0 || lk.Mode != core.ModeExclusive || lk.Limit != 0 {
		return n.raft.Propose(ctx, cmd)
	}
	wait, err := n.raft.Submit(ctx, cmd)
	if err != nil {
		return core.Result{}, err
	}
	n.handoff(lk.Key)
	return wait(ctx)
}

// handoff hands key's turn to its head waiter (waitq.Queue.Handoff) and
// counts a turn handed out.
func (n *Node) handoff(key string) {
	if n.queue.Handoff(key) {
		n.met.handoffsPipelined.Inc()
	}
}
