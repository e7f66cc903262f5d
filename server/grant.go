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
	"github.com/ticketd/ticketd/server/security"
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

// acquireRequest is one Acquire as the leader's grant path takes it, after
// validation (acquire.go).
type acquireRequest struct {
	key     string
	leaseMS int64 // milliseconds; ignored by the state machine under a session
	owner   string
	wait    bool
	// lockDelayMS is the Grant's lock-delay in milliseconds
	// (docs/design.md#lock-delay; 0: none).
	lockDelayMS int64
	// mode, limit and session are the Grant's (docs/design.md#sessions): a
	// shared lock, a semaphore of limit holders, the session to hold the lock
	// under (0: none).
	mode    core.Mode
	limit   uint32
	session uint64
}

// acquire serves Acquire on the promoted leader: the wait queue gives the turn
// to propose, then the grant is proposed (group-committed with others). A
// retry whose grant returned its owner's existing lock while an Expire of
// that lock is in flight goes round again (testdata/interaction/
// retry_waits_for_expire_in_flight.txt): the queue makes it wait while the
// lock is being removed; that Expire removes nothing when the retry applied
// after its decision (the retry restarted the lease, core.ExpireSeen), so
// the next round returns the same token, else a fresh grant with a new token.
//
// Without wait, the queue refuses (waitq.ErrHeld) only when this node's
// applied table shows key held incompatibly with the request by another
// owner, or under a lock-delay; grants in flight or queued waiters alone
// make the request wait until the table shows that or its turn comes
// (waitq.Queue.Enter: a refusal rests on the applied table, never on a
// grant in flight that may still fail). The refusal is answered only after
// a ReadIndex confirmed the leadership during the call, so the table it was
// read from is the committed one.
//
// Shared locks and semaphores (docs/design.md#waiting-and-fairness) go through
// the same path: the queue decides when a grant fits beside the key's holders
// and grants in flight, first in first out across modes. A limit that differs
// from the key's is a *waitq.LimitMismatchError, from the queue or, as a
// backstop, from the state machine (core.OutcomeLimitMismatch); a session the
// state machine does not know for this principal is a *SessionNotFoundError.
//
// A free key still under a lock-delay counts as held until the delay has
// passed (keyState), so waiters stay queued. limits.max_locks counts holders:
// the table's (core.StateMachine.HolderLen) and the grants in flight.
func (n *Node) acquire(ctx context.Context, r acquireRequest) (core.Result, error) {
	confirmed := false
	rounds := 0
	// The lock is bound to the caller's principal
	// (docs/security.md#locks-are-bound-to-their-principal).
	principal := n.grantPrincipal(ctx)
	id := holderID(r.owner, principal)
	// The principal's waiters on this leader are held to its quota
	// (quota.go); the waiters of the others are not affected.
	req := waitq.Request{Key: r.key, Owner: id, Mode: r.mode, Limit: r.limit, Session: r.session, Wait: r.wait,
		Principal: principal, Admit: n.quotaAdmit(principal, security.QuotaWaiters)}
	cmd := core.Grant(r.key, r.leaseMS, r.owner).WithPrincipal(principal).WithLockDelay(r.lockDelayMS).
		WithMode(r.mode).WithLimit(r.limit).WithSession(r.session)
	// A session this leader's table does not show as the caller's is refused
	// before the request queues or anything is proposed (core would refuse it
	// too, but only after a log entry). A session that ends while the request
	// waits is still refused by core when the Grant applies.
	if err := n.mayUseSession(ctx, r.session); err != nil {
		return core.Result{}, err
	}
	// limits.max_locks_per_session, also before anything queues or is
	// proposed (sessionlocks.go); this request counts until it returns.
	release, err := n.reserveSessionLock(r, id)
	if err != nil {
		return core.Result{}, err
	}
	defer release()
	for {
		if lim := n.cfg.Limits.MaxLocks; lim > 0 && n.sm.HolderLen()+n.queue.Inflight() >= lim && n.addsHolder(r, id) {
			return core.Result{}, fmt.Errorf("%w: %d locks (limits.max_locks)", ErrTooManyLocks, lim)
		}
		// The principal's lock quota (quota.go): refused before it waits,
		// and checked again, with a reservation, at its turn.
		if err := n.checkLockQuota(principal, r, id); err != nil {
			return core.Result{}, err
		}
		turn, err := n.queue.Enter(ctx, req)
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
		res, err := n.grantWithin(ctx, turn, cmd, principal, r, id)
		// A pipelined turn's grant (releasehandoff.go) rejected: the Release it
		// followed did not free the key first. The turn was requeued at the
		// head of the key's queue (FIFO kept); wait for the next one.
		for err == nil && res.Outcome == core.OutcomeGrantRejected && turn.Pipelined() {
			if turn, err = turn.Wait(ctx); err != nil {
				return core.Result{}, err
			}
			res, err = n.grantWithin(ctx, turn, cmd, principal, r, id)
		}
		if errors.Is(err, ErrLockEnding) && rounds < maxRegrantRounds &&
			(errors.Is(err, lessor.ErrExpired) || errors.Is(err, lessor.ErrNotHeld)) {
			rounds++
			continue
		}
		if err == nil && res.Outcome == core.OutcomeGranted && !res.Created {
			// The state machine returned the owner's existing holder (a
			// retry). The queue proposed this grant only if that holder, if
			// any, had the request's mode, limit and session; should they
			// differ after all, the other holder's token is never answered.
			if err := retryConflict(r, res); err != nil {
				return core.Result{}, err
			}
		}
		if err != nil || res.Outcome == core.OutcomeGranted {
			return res, err
		}
		switch res.Outcome {
		case core.OutcomeLimitMismatch:
			return core.Result{}, &waitq.LimitMismatchError{Key: r.key, Limit: res.Limit}
		case core.OutcomeSessionNotFound:
			return core.Result{}, &SessionNotFoundError{Session: r.session}
		}
		// GrantRejected: the table held key after all (a grant proposed in an
		// earlier term committed late). Defensive; wait again or refuse.
		if !r.wait {
			return core.Result{}, fmt.Errorf("%w: %q", waitq.ErrHeld, r.key)
		}
	}
}

// retryConflict returns an *waitq.OwnerConflictError when res, the existing
// holder a Grant of r returned (core.Result.Created false), has another
// mode, limit or session than r asked: core applies any Grant by the
// holder's owner and principal as its retry (docs/design.md#replicated-commands),
// so the leader checks what it got. A plain exclusive holder's Result
// carries the zero Mode and Limit (core's keyResult), which are exclusive
// and 0.
func retryConflict(r acquireRequest, res core.Result) error {
	mode := r.mode
	if r.limit > 0 {
		mode = core.ModeExclusive
	}
	if res.Mode == mode && res.Limit == r.limit && res.Session == r.session {
		return nil
	}
	return &waitq.OwnerConflictError{Key: r.key, Held: true, Mode: res.Mode, Limit: res.Limit, Session: res.Session}
}

// addsHolder reports whether r, by holder id (holderID), counts as a new
// holder against limits.max_locks: not an idempotent retry of a holder of
// its key, and, for an exclusive lock (limit 0), only when the key is free
// (one that waits for a held key replaces a holder); a
// shared or semaphore request may be granted beside the holders.
func (n *Node) addsHolder(r acquireRequest, id string) bool {
	holders := n.sm.Holders(r.key)
	if holderIn(holders, id) {
		return false
	}
	return len(holders) == 0 || r.mode == core.ModeShared || r.limit > 0
}

// isHolder reports whether the holder id (holderID) holds key: a Grant by
// it is an idempotent retry that returns that holder.
func (n *Node) isHolder(key, id string) bool { return holderIn(n.sm.Holders(key), id) }

// holderIn reports whether one of holders has the holder id (holderID).
func holderIn(holders []core.Lock, id string) bool {
	for _, lk := range holders {
		if holderID(lk.Owner, lk.Principal) == id {
			return true
		}
	}
	return false
}

// grantWithin proposes cmd with the turn (grant) once the grant is admitted
// against the principal's lock quota (reserveLockGrant), where it counts
// until its proposal returns; refused, the turn is passed on and the
// *security.QuotaError returned.
func (n *Node) grantWithin(ctx context.Context, turn *waitq.Turn, cmd core.Command, principal string, r acquireRequest, id string) (core.Result, error) {
	done, err := n.reserveLockGrant(principal, r, id)
	if err != nil {
		turn.Done()
		return core.Result{}, err
	}
	return n.grant(ctx, turn, cmd, done)
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
//     is a ghost: it is released at once (docs/design.md#ghost-locks), and a
//     retry by the same owner waits for that release (marked before the turn
//     ends);
//   - a grant that returned the lock its owner already held (an idempotent
//     retry) is never a ghost (abandoned_retry_is_not_ghost.txt), and is answered only if the
//     lessor, atomically with expiry, restarts that lock's lease
//     (lessor.Regrant); if an Expire of it is decided or in flight, the
//     answer is ErrLockEnding and the caller goes round for a fresh grant
//     (retry_waits_for_expire_in_flight.txt);
//   - a grant of a Pipelined turn (handed off as the previous holder's
//     Release was proposed; releasehandoff.go) that was rejected because the key was
//     still held when it applied requeues the turn at the head of the key's
//     queue (waitq.Turn.Requeue), unless the client left; acquire then waits
//     for the next turn;
//   - a grant that created its holder under a session whose lease has run
//     out, or that has ended, by the time the grant applied, is answered
//     *SessionNotFoundError: the session's end removes that holder too;
//   - an internal proposal timeout is ErrOutcomeUnknown, never the client's
//     context.DeadlineExceeded.
//
// proposed, if not nil, is called once the proposal has returned (the
// grant applied on this node, or failed), whether or not the client is
// still there: it ends the grant's reservation against its principal's lock
// quota.
func (n *Node) grant(ctx context.Context, turn *waitq.Turn, cmd core.Command, proposed func()) (core.Result, error) {
	type outcome struct {
		res core.Result
		err error
	}
	var claim atomic.Int32
	out := make(chan outcome, 1)
	n.bg.Add(1)
	n.http.Workers().Go(func() { // a worker keeps its grown stack (httpapi/workerpool.go)
		defer n.bg.Done()
		pctx := n.detached()
		res, err := n.raft.Propose(pctx, cmd)
		if proposed != nil {
			proposed()
		}
		if err != nil && pctx.Err() != nil && n.life.Err() == nil {
			err = fmt.Errorf("%w: grant of %q: %v", ErrOutcomeUnknown, cmd.Key, err)
		}
		granted := err == nil && res.Outcome == core.OutcomeGranted
		if err == nil && res.Outcome == core.OutcomeGrantRejected && turn.Pipelined() {
			n.met.handoffGrantsRejected.Inc()
		}
		switch {
		case granted && res.Created && res.Session != 0 && n.sessionOver(res.Session):
			// The session's lease ran out while the grant was in flight
			// (docs/design.md#sessions): its ExpireSession, decided, in
			// flight or already applied, carries a seen index the Grant did
			// not move, so it removes this holder with the others (a session
			// that has ended took the holder with it). The client is refused
			// as its KeepAlive would be, never handed a token being removed
			// or gone (testdata/interaction/acquire_under_expiring_session.txt);
			// the holder needs no ghost release.
			turn.Done()
			res, err = core.Result{}, &SessionNotFoundError{Session: res.Session}
		case granted && res.Created && !claim.CompareAndSwap(claimPending, claimDelivered):
			n.lessor.MarkGhost(cmd.Key, res.Token)
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
	})
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
	for n.lessor.Ghost(key, token) {
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

// keyState is the wait queue's view of key (waitq.Config.State), an adapter
// of two owners: its mode, limit and holders from the lock table, each with
// whether it is being removed from the lessor (n.ending: an Expire, a ghost
// Release or its session's end decided or in flight). The queue calls it
// with the key's shard mutex held; it takes the table's read lock and then
// the lessor's mutex, one after the other (doc.go, Concurrency).
//
// A free key under a lock-delay (docs/design.md#lock-delay) is reported
// Delayed: no Acquire may have it (without wait: AlreadyExists), and waiters
// stay queued until the lessor's OnDelayEnd kicks the queue.
func (n *Node) keyState(key string) waitq.KeyState {
	holders := n.sm.Holders(key)
	if len(holders) == 0 {
		return waitq.KeyState{Delayed: n.lessor.Delayed(key) > 0}
	}
	ks := waitq.KeyState{Mode: holders[0].Mode, Limit: holders[0].Limit, Holders: make([]waitq.Holder, len(holders))}
	for i, lk := range holders {
		ks.Holders[i] = waitq.Holder{Owner: holderID(lk.Owner, lk.Principal), Session: lk.Session, Removing: n.ending(lk), LockDelay: lk.LockDelayMS > 0}
	}
	return ks
}

// sessionOver reports whether session id has ended (the table no longer
// has it) or its lease has run out by this leader's measure.
func (n *Node) sessionOver(id uint64) bool {
	if _, open := n.sm.Session(id); !open {
		return true
	}
	return n.lessor.SessionExpiring(id)
}

// ending reports whether holder lk is being removed: an Expire of it, or a
// ghost Release, is decided or in flight, or, for a holder under a session
// (docs/design.md#sessions), its session's lease ran out, its ExpireSession
// is decided or in flight, or its CloseSession is in flight (proposeClose).
// Such a holder is no longer valid (CheckToken) and never handed out again,
// not even to its owner. The lessor answers it (lessor.Lessor.Ending) with
// the session the table records for lk.
func (n *Node) ending(lk core.Lock) bool { return n.lessor.Ending(lk.Key, lk.Token, lk.Session) }
