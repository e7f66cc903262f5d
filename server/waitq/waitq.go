package waitq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Sentinel errors of package waitq. Compare with errors.Is. Their texts
// carry no package prefix: the server sends them to clients as error
// messages (issue 19), so they read as the user's terms.
var (
	// ErrHeld: the lock table shows the key held by another owner (or under
	// a lock-delay) and the request did not ask to wait. A grant in flight or
	// a queue alone never causes it (see Enter). The API maps it to
	// AlreadyExists.
	ErrHeld = errors.New("held by another owner")
	// ErrFull: the key already has MaxWaiters waiting requests, or the queue
	// MaxWaitersTotal over all keys. The API maps it to ResourceExhausted.
	ErrFull = errors.New("too many waiters")
	// ErrClosed: the queue is closed because this node is not (or no longer)
	// the leader; waiters fail with it on demotion. The API maps it to
	// Unavailable with the new leader, and clients retry there.
	ErrClosed = errors.New("this node is no longer the leader")
	// ErrNotRequeued: Turn.Wait was called on a turn that was not requeued
	// (a caller bug).
	ErrNotRequeued = errors.New("waitq: turn was not requeued")
)

// KeyState is what the lock table and the lessor say about a key.
type KeyState struct {
	// Held is true when the lock table holds key; Owner is then its owner.
	Held  bool
	Owner string
	// Removing is true when the holder is about to be removed: an Expire or a
	// ghost Release for it is proposed and not yet applied. Such a lock is
	// never handed out again, not even to its own owner.
	Removing bool
}

// Config configures a Queue.
type Config struct {
	// State reports the key's lock-table and removal state. Required. It is
	// called with the queue's mutex held and must not call back into the queue.
	State func(key string) KeyState
	// MaxWaiters is the most requests that may wait on one key; 0 means no limit.
	MaxWaiters int
	// MaxWaitersTotal is the most requests that may wait over all keys
	// together (each one holds a goroutine and its request); 0 means no limit.
	// A retry of a request in flight always gets its place (see Enter).
	MaxWaitersTotal int
}

// Queue is the leader's per-key gate for grants: at most one grant proposal
// per key is in flight, a key known held is never proposed for another owner,
// and requests that wait are served first-in first-out. It is safe for
// concurrent use.
//
// A Queue starts closed. Open it when the node becomes the promoted leader,
// Close it on demotion: every waiter then fails with ErrClosed and all
// per-key state is forgotten (a new leader rebuilds it from the lock table).
//
// Keys are spread over shards by a hash of the key, each with its own mutex
// and map (issue 21: one global mutex was the server's most contended lock at
// 64 clients), so requests for different keys rarely wait for each other.
// Open and Close take every shard's mutex; the counters are atomic.
type Queue struct {
	cfg Config

	shards [shardCount]shard
	// open and gen are written with every shard's mutex held (Open, Close)
	// and read with one held.
	open     bool
	gen      uint64 // bumped by Open and Close: turns of an older generation are void
	waiting  atomic.Int64
	inflight atomic.Int64
}

// shardCount is the number of key shards of a Queue.
const shardCount = 64

// shard holds the gates of the keys that hash to it.
type shard struct {
	mu   sync.Mutex
	keys map[string]*keyState
}

// shardOf returns key's shard (FNV-1a of the key).
func (q *Queue) shardOf(key string) *shard {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return &q.shards[h%shardCount]
}

// lockAll locks every shard (Open, Close); unlockAll undoes it.
func (q *Queue) lockAll() {
	for i := range q.shards {
		q.shards[i].mu.Lock()
	}
}

func (q *Queue) unlockAll() {
	for i := range q.shards {
		q.shards[i].mu.Unlock()
	}
}

// keyState is the gate of one key.
type keyState struct {
	inflight      bool   // a grant proposal holds the turn
	inflightOwner string // owner of that grant
	queue         []*waiter
	tentative     int // waiters in queue with tentative set
}

type waiter struct {
	owner string
	// tentative: a request without wait that found the key free in the table
	// but busy in the queue; it fails with ErrHeld once the table shows the
	// key held by another owner (refuseTentative).
	tentative bool
	done      chan struct{} // closed when turn or err is set
	turn      *Turn
	err       error
}

// Turn is the right to propose one grant for a key. The holder must call Done
// exactly once when its proposal has resolved (applied or failed), after
// recording any removal it started (so that a same-owner retry waits for it).
type Turn struct {
	q         *Queue
	sh        *shard
	key       string
	owner     string
	gen       uint64
	pipelined bool    // handed out by Handoff, before the key's Release applied
	requeued  *waiter // set by Requeue: the owner's place back at the head
	once      sync.Once
}

// New returns a closed Queue. Errors: a nil State.
func New(cfg Config) (*Queue, error) {
	if cfg.State == nil {
		return nil, errors.New("waitq: Config.State is required")
	}
	if cfg.MaxWaiters < 0 || cfg.MaxWaitersTotal < 0 {
		return nil, errors.New("waitq: negative MaxWaiters or MaxWaitersTotal")
	}
	q := &Queue{cfg: cfg}
	for i := range q.shards {
		q.shards[i].keys = map[string]*keyState{}
	}
	return q, nil
}

// Open starts accepting Enter calls (the node became the promoted leader).
func (q *Queue) Open() {
	q.lockAll()
	defer q.unlockAll()
	q.gen++
	q.open = true
}

// Close fails every waiter with ErrClosed and forgets all key state; later
// Enter calls fail with ErrClosed until Open. Turns handed out before are void.
func (q *Queue) Close() {
	q.lockAll()
	defer q.unlockAll()
	q.gen++
	q.open = false
	for i := range q.shards {
		sh := &q.shards[i]
		for _, st := range sh.keys {
			for _, w := range st.queue {
				w.err = ErrClosed
				close(w.done)
			}
		}
		sh.keys = map[string]*keyState{}
	}
	q.waiting.Store(0)
	q.inflight.Store(0)
}

// Enter asks for the turn to propose a grant of key for owner.
//
// It returns a Turn at once when the key is free (not held, no grant in
// flight, nobody waiting, nothing being removed) or when the key is held by
// owner itself and not being removed (a retry: the grant returns the same
// lock). A request whose owner matches the grant in flight or the holder
// being removed waits, with or without wait, so a retry never receives a
// token about to be released (DESIGN.md, Ghost locks); such a retry keeps the
// place of the request in flight, at the head of the queue. With wait a
// request joins the key's FIFO queue and returns when it reaches the head and
// the key is free.
//
// Without wait, it fails with ErrHeld only when the lock table shows the key
// held by another owner (or under a lock-delay: KeyState Held with no
// owner). When the table does not, and only the queue stands in the way (a
// grant in flight, waiters queued between turns, a pipelined handoff whose
// Release applied before its Grant), the request waits as a tentative
// waiter at the tail: it fails with ErrHeld as soon as the table shows the
// key held by another owner (that grant applied), or gets its turn in FIFO
// order, whichever comes first. Refusing earlier would report a state no
// linearizable read sees (issue: hashicorp seed 67, a CheckToken between
// the refusal and the grant's apply saw the key free). A tentative waiter
// counts toward MaxWaiters and MaxWaitersTotal like any waiter (it holds a
// goroutine and its request the same way); past them it fails with ErrFull,
// which claims nothing about the key.
//
// Errors: ErrHeld, ErrFull (MaxWaiters or MaxWaitersTotal reached), ErrClosed (not leader, or demoted while waiting),
// ctx.Err() (the waiter left the queue).
func (q *Queue) Enter(ctx context.Context, key, owner string, wait bool) (*Turn, error) {
	sh := q.shardOf(key)
	sh.mu.Lock()
	if !q.open {
		sh.mu.Unlock()
		return nil, ErrClosed
	}
	ks := q.cfg.State(key)
	st := sh.keys[key]
	if st == nil {
		st = &keyState{}
		sh.keys[key] = st
	}
	if !st.inflight && !ks.Removing && ks.Held && ks.Owner == owner {
		t := q.take(sh, key, st, owner)
		sh.mu.Unlock()
		return t, nil
	}
	if !st.inflight && !ks.Removing && !ks.Held && len(st.queue) == 0 {
		t := q.take(sh, key, st, owner)
		sh.mu.Unlock()
		return t, nil
	}
	retry := (st.inflight && st.inflightOwner == owner) || (ks.Removing && ks.Owner == owner)
	if !wait && !retry && heldByOther(ks, owner) {
		forget(sh, key, st)
		sh.mu.Unlock()
		return nil, heldError(key)
	}
	tentative := !wait && !retry
	if !retry && q.cfg.MaxWaiters > 0 && len(st.queue) >= q.cfg.MaxWaiters {
		forget(sh, key, st)
		sh.mu.Unlock()
		return nil, fmt.Errorf("%w: key %q has %d already", ErrFull, key, len(st.queue))
	}
	// The total is counted over all shards: add first, and take the place
	// back when that went over the limit, so the limit is exact.
	if n := q.waiting.Add(1); !retry && q.cfg.MaxWaitersTotal > 0 && n > int64(q.cfg.MaxWaitersTotal) {
		q.waiting.Add(-1)
		forget(sh, key, st)
		sh.mu.Unlock()
		return nil, fmt.Errorf("%w: %d requests wait in all", ErrFull, n-1)
	}
	w := &waiter{owner: owner, tentative: tentative, done: make(chan struct{})}
	if tentative {
		st.tentative++
	}
	if retry {
		// A retry of the request in flight keeps that request's place: first.
		st.queue = append([]*waiter{w}, st.queue...)
	} else {
		st.queue = append(st.queue, w)
	}
	sh.mu.Unlock()
	return q.await(ctx, key, w)
}

// await waits until w, queued on key, gets the turn or fails, or ctx ends
// (w then leaves the queue; a turn that raced with the cancellation is passed
// on). No shard mutex held.
func (q *Queue) await(ctx context.Context, key string, w *waiter) (*Turn, error) {
	select {
	case <-w.done:
		return w.turn, w.err
	case <-ctx.Done():
	}
	sh := q.shardOf(key)
	sh.mu.Lock()
	select {
	case <-w.done: // the turn (or a failure) raced with the cancellation
		sh.mu.Unlock()
		if w.turn != nil {
			w.turn.Done() // pass the turn on to the next waiter
		}
		return nil, ctx.Err()
	default:
	}
	if st := sh.keys[key]; st != nil {
		for i, x := range st.queue {
			if x == w {
				st.queue = append(st.queue[:i], st.queue[i+1:]...)
				q.waiting.Add(-1)
				if w.tentative {
					st.tentative--
				}
				break
			}
		}
		q.kick(sh, key) // the next waiter may be servable now
	}
	sh.mu.Unlock()
	return nil, ctx.Err()
}

// take hands the turn of key to owner; sh.mu held.
func (q *Queue) take(sh *shard, key string, st *keyState, owner string) *Turn {
	st.inflight = true
	st.inflightOwner = owner
	q.inflight.Add(1)
	return &Turn{q: q, sh: sh, key: key, owner: owner, gen: q.gen}
}

// forget drops an idle key's state; sh.mu held.
func forget(sh *shard, key string, st *keyState) {
	if !st.inflight && len(st.queue) == 0 {
		delete(sh.keys, key)
	}
}

// Kick re-examines key after its lock was removed (a Release or Expire
// applied) or its removal ended: the head waiter gets the turn when the key is
// free. Call it from the apply hook; it does not block.
func (q *Queue) Kick(key string) {
	sh := q.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	q.kick(sh, key)
}

// kick is Kick with sh.mu, key's shard, held. Tentative waiters fail first
// if the table shows the key held by another owner (refuseTentative).
func (q *Queue) kick(sh *shard, key string) {
	st := sh.keys[key]
	if !q.open || st == nil {
		return
	}
	var ks KeyState
	known := false
	if st.tentative > 0 {
		ks, known = q.cfg.State(key), true
		q.refuseTentative(key, st, ks)
	}
	if st.inflight {
		return
	}
	if len(st.queue) == 0 {
		delete(sh.keys, key)
		return
	}
	if !known {
		ks = q.cfg.State(key)
	}
	head := st.queue[0]
	if ks.Removing || (ks.Held && ks.Owner != head.owner) {
		return
	}
	q.serveHead(sh, key, st)
}

// heldByOther reports whether ks shows the key held by someone other than
// owner in the lock table (a lock-delay is held by no owner, so by another).
func heldByOther(ks KeyState, owner string) bool { return ks.Held && ks.Owner != owner }

// heldError is the ErrHeld a request without wait gets for key.
func heldError(key string) error { return fmt.Errorf("key %q is %w", key, ErrHeld) }

// refuseTentative fails with ErrHeld every tentative waiter of key whose
// owner is not the holder ks shows: the table shows the key held by another
// owner now, between the waiter's arrival and its answer, so the refusal is
// linearizable. st's shard mutex held.
func (q *Queue) refuseTentative(key string, st *keyState, ks KeyState) {
	if st.tentative == 0 || !ks.Held {
		return
	}
	keep := st.queue[:0]
	for _, w := range st.queue {
		if !w.tentative || !heldByOther(ks, w.owner) {
			keep = append(keep, w)
			continue
		}
		w.err = heldError(key)
		close(w.done)
		st.tentative--
		q.waiting.Add(-1)
	}
	clear(st.queue[len(keep):])
	st.queue = keep
}

// serveHead hands the turn to the head waiter of key; sh.mu held.
func (q *Queue) serveHead(sh *shard, key string, st *keyState) *Turn {
	head := st.queue[0]
	st.queue[0] = nil
	st.queue = st.queue[1:]
	q.waiting.Add(-1)
	if head.tentative {
		st.tentative--
	}
	head.turn = q.take(sh, key, st, head.owner)
	close(head.done)
	return head.turn
}

// Done ends the turn: the key's grant is no longer in flight, and the next
// waiter is served if the key is free. Later calls do nothing; a turn from
// before a Close/Open does nothing.
func (t *Turn) Done() {
	t.once.Do(func() {
		q := t.q
		t.sh.mu.Lock()
		defer t.sh.mu.Unlock()
		if q.gen != t.gen {
			return
		}
		q.end(t)
		q.kick(t.sh, t.key)
	})
}

// end clears the key's grant in flight of t; t.sh.mu held, t of this generation.
func (q *Queue) end(t *Turn) {
	if st := t.sh.keys[t.key]; st != nil && st.inflight {
		st.inflight = false
		st.inflightOwner = ""
		q.inflight.Add(-1)
	}
}

// Key returns the key the turn is for.
func (t *Turn) Key() string { return t.key }

// Waiting returns the number of requests waiting, over all keys. It takes no
// lock.
func (q *Queue) Waiting() int { return int(q.waiting.Load()) }

// Inflight returns the number of grant proposals holding a turn. It takes no
// lock (Acquire reads it on every request for the lock-table limit).
func (q *Queue) Inflight() int { return int(q.inflight.Load()) }
