package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/lessor"
	"github.com/ticketd/ticketd/server/waitq"
)

// This file is the grant path of Acquire on the leader: the wait queue's
// turn, the Grant proposal detached from the client, what an idempotent retry
// may receive, and ghost locks (grants whose client left) with their release.

// newOwner returns a unique owner id for a request that gave none.
func (n *Node) newOwner() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return n.cfg.ID + "-" + hex.EncodeToString(b[:])
}

// maxRegrantRounds bounds how often one Acquire goes round again because its
// idempotent retry found the lock ending (ErrLockEnding); each round waits for
// that lock's removal, so more than one is already rare.
const maxRegrantRounds = 4

// acquire serves Acquire on the promoted leader: the wait queue gives the turn
// to propose, then the grant is proposed (group-committed with others). A
// retry whose grant returned its owner's existing lock while an Expire of
// that lock is in flight goes round again (issue 14, race 1): the queue makes
// it wait while the lock is being removed; since issue 15 that Expire removes
// nothing when the retry applied after its decision (the retry restarted the
// lease, core.ExpireSeen), so the next round returns the same token, else a
// fresh grant with a new token.
//
// Without wait, the queue refuses (waitq.ErrHeld) only when this node's
// applied table shows key held by another owner or under a lock-delay; a
// grant in flight or queued waiters alone make the request wait until that
// grant applies or its turn comes (waitq.Queue.Enter; hashicorp seed 67).
// The refusal is answered only after a ReadIndex confirmed the leadership
// during the call, so the table it was read from is the committed one.
//
// lockDelayMS is the Grant's lock-delay in milliseconds (issue 15; 0: none).
// A free key still under a lock-delay counts as held until the delay has
// passed (keyState), so waiters stay queued.
func (n *Node) acquire(ctx context.Context, key string, leaseMS int64, owner string, wait bool, lockDelayMS int64) (core.Result, error) {
	confirmed := false
	rounds := 0
	principal := n.grantPrincipal(ctx) // issue 13: the lock is bound to it
	for {
		if lim := n.cfg.Limits.MaxLocks; lim > 0 {
			if _, held := n.sm.Get(key); !held && n.sm.Len()+n.queue.Inflight() >= lim {
				return core.Result{}, fmt.Errorf("%w: %d locks", ErrTooManyLocks, lim)
			}
		}
		turn, err := n.queue.Enter(ctx, key, holderID(owner, principal), wait)
		if errors.Is(err, waitq.ErrHeld) && !confirmed {
			// "Held" was read from this node's table, which is stale on a
			// deposed leader (paused or cut off while its successor released
			// the key). Refuse only after a quorum confirms leadership and the
			// table has applied everything committed (ReadIndex), then look again.
			if err := n.raft.ReadIndex(ctx); err != nil {
				return core.Result{}, err
			}
			confirmed = true
			continue
		}
		if err != nil {
			return core.Result{}, err
		}
		cmd := core.Grant(key, leaseMS, owner).WithPrincipal(principal).WithLockDelay(lockDelayMS)
		res, err := n.grant(ctx, turn, cmd)
		// A pipelined turn's grant (handoff.go) rejected: the Release it
		// followed did not free the key first. The turn was requeued at the
		// head of the key's queue (FIFO kept); wait for the next one.
		for err == nil && res.Outcome == core.OutcomeGrantRejected && turn.Pipelined() {
			if turn, err = turn.Wait(ctx); err != nil {
				return core.Result{}, err
			}
			res, err = n.grant(ctx, turn, cmd)
		}
		if errors.Is(err, ErrLockEnding) && rounds < maxRegrantRounds &&
			(errors.Is(err, lessor.ErrExpired) || errors.Is(err, lessor.ErrNotHeld)) {
			rounds++
			continue
		}
		if err != nil || res.Outcome == core.OutcomeGranted {
			return res, err
		}
		// GrantRejected: the table held key after all (a grant proposed in an
		// earlier term committed late). Defensive; wait again or refuse.
		if !wait {
			return core.Result{}, fmt.Errorf("%w: %q", waitq.ErrHeld, key)
		}
	}
}

// Claim states of one grant proposal: the client takes the result, or the
// client left first and the grant, if it applies, is a ghost.
const (
	claimPending int32 = iota
	claimDelivered
	claimAbandoned
)

// grant proposes cmd with the turn, detached from ctx so that the outcome is
// always known, and decides what the client may have before the turn ends:
//
//   - a grant that created its lock (core.Result.Created) whose client is gone
//     is a ghost: it is released at once (DESIGN.md, Leases), and a retry by
//     the same owner waits for that release (marked before the turn ends);
//   - a grant that returned the lock its owner already held (an idempotent
//     retry) is never a ghost (issue 14, race 2), and is answered only if the
//     lessor, atomically with expiry, restarts that lock's lease
//     (lessor.Regrant); if an Expire of it is decided or in flight, the
//     answer is ErrLockEnding and the caller goes round for a fresh grant
//     (issue 14, race 1);
//   - a grant of a Pipelined turn (handed off as the previous holder's
//     Release was proposed; handoff.go) that was rejected because the key was
//     still held when it applied requeues the turn at the head of the key's
//     queue (waitq.Turn.Requeue), unless the client left; acquire then waits
//     for the next turn;
//   - an internal proposal timeout is ErrOutcomeUnknown, never the client's
//     context.DeadlineExceeded.
func (n *Node) grant(ctx context.Context, turn *waitq.Turn, cmd core.Command) (core.Result, error) {
	type outcome struct {
		res core.Result
		err error
	}
	var claim atomic.Int32
	out := make(chan outcome, 1)
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		pctx, cancel := context.WithTimeout(n.life, n.proposeTimeout)
		res, err := n.raft.Propose(pctx, cmd)
		if err != nil && pctx.Err() != nil && n.life.Err() == nil {
			err = fmt.Errorf("%w: grant of %q: %v", ErrOutcomeUnknown, cmd.Key, err)
		}
		cancel()
		granted := err == nil && res.Outcome == core.OutcomeGranted
		if err == nil && res.Outcome == core.OutcomeGrantRejected && turn.Pipelined() {
			n.met.handoffGrantsRejected.Inc()
		}
		switch {
		case granted && res.Created && !claim.CompareAndSwap(claimPending, claimDelivered):
			n.ghostMu.Lock()
			n.ghosts[cmd.Key] = res.Token
			n.ghostMu.Unlock()
			turn.Done()
			n.met.ghosts.Inc()
			n.log.Debug("ghost lock: client gone before its grant applied", zap.String("key", cmd.Key), zap.Uint64("token", res.Token))
			n.releaseGhost(cmd.Key, res.Token)
		case granted && !res.Created && claim.CompareAndSwap(claimPending, claimDelivered):
			if rerr := n.lessor.Regrant(cmd.Key, res.Token); rerr != nil {
				n.log.Debug("retried grant found its lock ending", zap.String("key", cmd.Key), zap.Uint64("token", res.Token), zap.Error(rerr))
				res, err = core.Result{}, fmt.Errorf("%w: %q token %d: %w", ErrLockEnding, cmd.Key, res.Token, rerr)
			}
			turn.Done()
		case err == nil && res.Outcome == core.OutcomeGrantRejected && turn.Pipelined() &&
			claim.CompareAndSwap(claimPending, claimDelivered):
			turn.Requeue() // acquire waits again, first in the key's queue
		default:
			turn.Done()
		}
		out <- outcome{res, err}
	}()
	select {
	case o := <-out:
		return o.res, o.err
	case <-ctx.Done():
		if claim.CompareAndSwap(claimPending, claimAbandoned) {
			return core.Result{}, ctx.Err()
		}
		o := <-out
		return o.res, o.err
	}
}

// releaseGhost proposes Release{key, token} until it applies, this node stops
// leading, or the node closes.
func (n *Node) releaseGhost(key string, token uint64) {
	for n.isGhost(key, token) {
		_, err := n.proposeDetached(n.raft, core.Release(key, token))
		if err == nil || errors.Is(err, core.ErrNotLeader) || errors.Is(err, core.ErrStopped) || n.life.Err() != nil {
			return
		}
		n.log.Debug("ghost release failed; retrying", zap.String("key", key), zap.Error(err))
		if !n.pause(retryPause) {
			return
		}
	}
}

// keyState is the wait queue's view of key: its holder in the lock table, and
// whether that holder is being removed (an Expire or ghost Release in flight).
//
// A free key under a lock-delay (issue 15) is reported held by no owner and
// being removed: no Acquire may have it (without wait: AlreadyExists), and
// waiters stay queued until the lessor's OnDelayEnd kicks the queue.
func (n *Node) keyState(key string) waitq.KeyState {
	lk, ok := n.sm.Get(key)
	if !ok {
		if n.lessor.Delayed(key) > 0 {
			return waitq.KeyState{Held: true, Removing: true}
		}
		return waitq.KeyState{}
	}
	return waitq.KeyState{
		Held:     true,
		Owner:    holderID(lk.Owner, lk.Principal),
		Removing: n.lessor.Expiring(key, lk.Token) || n.isGhost(key, lk.Token),
	}
}

func (n *Node) isGhost(key string, token uint64) bool {
	n.ghostMu.Lock()
	defer n.ghostMu.Unlock()
	t, ok := n.ghosts[key]
	return ok && t == token
}
