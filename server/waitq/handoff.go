package waitq

import (
	"context"

	"github.com/ticketd/ticketd/core"
)

// This file is the pipelined handoff (docs/design.md#handoff): the head waiter's
// turn is handed out when the holder's Release is proposed rather than when
// it applies, so that its Grant follows the Release in the log and a handoff
// costs one commit instead of two. The state machine rejects the Grant
// harmlessly (core.Grant: GrantRejected) if the Release turns out not to free
// the key; the waiter then goes back to the head of the queue (Requeue).

// Handoff gives the turn of key to its head waiter now, before the holder's
// lock is removed, and reports whether it did. Call it just before proposing
// a Release of the key's current holder, and only when that holder's Grant
// asked for no lock-delay (an Expire racing with the Release would start one,
// and a grant proposed behind it could apply during the delay). The turn is
// handed out only for an exclusive lock (one holder, core.ModeExclusive,
// limit 0) whose head waiter asks for one too, when the holder is not being
// removed (no Expire or ghost Release in flight), no grant is in flight, and
// the head waiter's owner is not the holder (a Grant of the same owner would
// return the lock about to be released). Shared keys and semaphores never get
// a pipelined turn: their Release is two-step (it applies, then Kick serves
// the waiters whose grants fit, several at once), since which waiters fit
// depends on what the Release leaves. The turn is Pipelined; a waiter whose
// grant is then rejected calls Requeue and waits again at the head. Tentative
// waiters (requests without wait, see Enter) that the table refuses fail with
// ErrHeld first, so a pipelined turn never goes to one. It does not block.
func (q *Queue) Handoff(key string) bool {
	sh := q.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	st := sh.keys[key]
	if !q.open || st == nil || len(st.flights) > 0 || len(st.queue) == 0 {
		return false
	}
	ks := q.cfg.State(key)
	q.refuseTentative(key, st, ks) // the table shows the key held now
	if len(st.queue) == 0 {
		forget(sh, key, st)
		return false
	}
	head := st.queue[0]
	if len(ks.Holders) != 1 || ks.Mode != core.ModeExclusive || ks.Limit != 0 || ks.Holders[0].Removing ||
		head.mode != core.ModeExclusive || head.limit != 0 || ks.Holders[0].Owner == head.owner {
		return false
	}
	q.serveHead(sh, key, st).pipelined = true
	return true
}

// Pipelined reports whether the turn was handed out by Handoff, before the
// previous holder's Release applied: its grant may be rejected because the
// key is still held when it applies.
func (t *Turn) Pipelined() bool { return t.pipelined }

// Requeue ends the turn like Done, but puts its owner back at the head of the
// key's queue, atomically, so that no later waiter overtakes it: for a
// Pipelined turn whose grant was rejected (the Release it followed did not
// free the key, or applied after it). Wait then waits for the next turn.
// Calling Done or Requeue again does nothing; after a Close the requeued
// waiter fails with ErrClosed.
func (t *Turn) Requeue() {
	t.once.Do(func() {
		q := t.q
		t.sh.mu.Lock()
		defer t.sh.mu.Unlock()
		w := &waiter{owner: t.owner, principal: t.principal, mode: t.mode, limit: t.limit, session: t.session, done: make(chan struct{})}
		t.requeued = w
		if q.gen != t.gen || !q.open {
			w.err = ErrClosed
			close(w.done)
			return
		}
		q.end(t)
		st := t.sh.keys[t.key]
		if st == nil {
			st = &keyState{}
			t.sh.keys[t.key] = st
		}
		st.queue = append([]*waiter{w}, st.queue...)
		st.limit = t.limit
		q.waiting.Add(1)
		_ = q.admitPrincipal(w, nil, true) // back in its place: never refused
		q.kick(t.sh, t.key)
	})
}

// Wait waits for the next turn of a requeued turn's owner (see Requeue), as
// Enter with wait does. Errors: ErrClosed, ctx.Err() (the waiter left the
// queue), and ErrNotRequeued when Requeue was not called.
func (t *Turn) Wait(ctx context.Context) (*Turn, error) {
	t.sh.mu.Lock()
	w := t.requeued
	t.sh.mu.Unlock()
	if w == nil {
		return nil, ErrNotRequeued
	}
	return t.q.await(ctx, t.key, w)
}
