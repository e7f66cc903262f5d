package waitq

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Sentinel errors of package waitq. Compare with errors.Is. Their texts
// carry no package prefix: the server sends them to clients as error
// messages (issue 19), so they read as the user's terms.
var (
	// ErrHeld: the key is held (or a grant for it is in flight) and the
	// request did not ask to wait. The API maps it to AlreadyExists.
	ErrHeld = errors.New("held by another owner")
	// ErrFull: the key already has MaxWaiters waiting requests, or the queue
	// MaxWaitersTotal over all keys. The API maps it to ResourceExhausted.
	ErrFull = errors.New("too many waiters")
	// ErrClosed: the queue is closed because this node is not (or no longer)
	// the leader; waiters fail with it on demotion. The API maps it to
	// Unavailable with the new leader, and clients retry there.
	ErrClosed = errors.New("this node is no longer the leader")
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
type Queue struct {
	cfg Config

	mu       sync.Mutex
	open     bool
	gen      uint64 // bumped by Open and Close: turns of an older generation are void
	keys     map[string]*keyState
	waiting  int
	inflight int
}

// keyState is the gate of one key.
type keyState struct {
	inflight      bool   // a grant proposal holds the turn
	inflightOwner string // owner of that grant
	queue         []*waiter
}

type waiter struct {
	owner string
	done  chan struct{} // closed when turn or err is set
	turn  *Turn
	err   error
}

// Turn is the right to propose one grant for a key. The holder must call Done
// exactly once when its proposal has resolved (applied or failed), after
// recording any removal it started (so that a same-owner retry waits for it).
type Turn struct {
	q    *Queue
	key  string
	gen  uint64
	once sync.Once
}

// New returns a closed Queue. Errors: a nil State.
func New(cfg Config) (*Queue, error) {
	if cfg.State == nil {
		return nil, errors.New("waitq: Config.State is required")
	}
	if cfg.MaxWaiters < 0 || cfg.MaxWaitersTotal < 0 {
		return nil, errors.New("waitq: negative MaxWaiters or MaxWaitersTotal")
	}
	return &Queue{cfg: cfg, keys: map[string]*keyState{}}, nil
}

// Open starts accepting Enter calls (the node became the promoted leader).
func (q *Queue) Open() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.gen++
	q.open = true
}

// Close fails every waiter with ErrClosed and forgets all key state; later
// Enter calls fail with ErrClosed until Open. Turns handed out before are void.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.gen++
	q.open = false
	for _, st := range q.keys {
		for _, w := range st.queue {
			w.err = ErrClosed
			close(w.done)
		}
	}
	q.keys = map[string]*keyState{}
	q.waiting = 0
	q.inflight = 0
}

// Enter asks for the turn to propose a grant of key for owner.
//
// It returns a Turn at once when the key is free (not held, no grant in
// flight, nobody waiting, nothing being removed) or when the key is held by
// owner itself and not being removed (a retry: the grant returns the same
// lock). Otherwise, without wait, it fails with ErrHeld — except that a
// request whose owner matches the grant in flight or the holder being removed
// waits anyway, so a retry never receives a token about to be released
// (DESIGN.md, Ghost locks); such a retry keeps the place of the request in
// flight, at the head of the queue. With wait it joins the key's FIFO queue
// and returns when it reaches the head and the key is free.
//
// Errors: ErrHeld, ErrFull (MaxWaiters or MaxWaitersTotal reached), ErrClosed (not leader, or demoted while waiting),
// ctx.Err() (the waiter left the queue).
func (q *Queue) Enter(ctx context.Context, key, owner string, wait bool) (*Turn, error) {
	q.mu.Lock()
	if !q.open {
		q.mu.Unlock()
		return nil, ErrClosed
	}
	ks := q.cfg.State(key)
	st := q.keys[key]
	if st == nil {
		st = &keyState{}
		q.keys[key] = st
	}
	if !st.inflight && !ks.Removing && ks.Held && ks.Owner == owner {
		t := q.take(key, st, owner)
		q.mu.Unlock()
		return t, nil
	}
	if !st.inflight && !ks.Removing && !ks.Held && len(st.queue) == 0 {
		t := q.take(key, st, owner)
		q.mu.Unlock()
		return t, nil
	}
	retry := (st.inflight && st.inflightOwner == owner) || (ks.Removing && ks.Owner == owner)
	if !wait && !retry {
		q.forget(key, st)
		q.mu.Unlock()
		return nil, fmt.Errorf("key %q is %w", key, ErrHeld)
	}
	if !retry && q.cfg.MaxWaiters > 0 && len(st.queue) >= q.cfg.MaxWaiters {
		q.forget(key, st)
		q.mu.Unlock()
		return nil, fmt.Errorf("%w: key %q has %d already", ErrFull, key, len(st.queue))
	}
	if !retry && q.cfg.MaxWaitersTotal > 0 && q.waiting >= q.cfg.MaxWaitersTotal {
		q.forget(key, st)
		q.mu.Unlock()
		return nil, fmt.Errorf("%w: %d requests wait in all", ErrFull, q.waiting)
	}
	w := &waiter{owner: owner, done: make(chan struct{})}
	if retry {
		// A retry of the request in flight keeps that request's place: first.
		st.queue = append([]*waiter{w}, st.queue...)
	} else {
		st.queue = append(st.queue, w)
	}
	q.waiting++
	q.mu.Unlock()

	select {
	case <-w.done:
		return w.turn, w.err
	case <-ctx.Done():
	}
	q.mu.Lock()
	select {
	case <-w.done: // the turn (or a failure) raced with the cancellation
		q.mu.Unlock()
		if w.turn != nil {
			w.turn.Done() // pass the turn on to the next waiter
		}
		return nil, ctx.Err()
	default:
	}
	if st := q.keys[key]; st != nil {
		for i, x := range st.queue {
			if x == w {
				st.queue = append(st.queue[:i], st.queue[i+1:]...)
				q.waiting--
				break
			}
		}
		q.kick(key) // the next waiter may be servable now
	}
	q.mu.Unlock()
	return nil, ctx.Err()
}

// take hands the turn of key to owner; q.mu held.
func (q *Queue) take(key string, st *keyState, owner string) *Turn {
	st.inflight = true
	st.inflightOwner = owner
	q.inflight++
	return &Turn{q: q, key: key, gen: q.gen}
}

// forget drops an idle key's state; q.mu held.
func (q *Queue) forget(key string, st *keyState) {
	if !st.inflight && len(st.queue) == 0 {
		delete(q.keys, key)
	}
}

// Kick re-examines key after its lock was removed (a Release or Expire
// applied) or its removal ended: the head waiter gets the turn when the key is
// free. Call it from the apply hook; it does not block.
func (q *Queue) Kick(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.kick(key)
}

// kick is Kick with q.mu held.
func (q *Queue) kick(key string) {
	st := q.keys[key]
	if !q.open || st == nil || st.inflight {
		return
	}
	if len(st.queue) == 0 {
		delete(q.keys, key)
		return
	}
	ks := q.cfg.State(key)
	head := st.queue[0]
	if ks.Removing || (ks.Held && ks.Owner != head.owner) {
		return
	}
	st.queue[0] = nil
	st.queue = st.queue[1:]
	q.waiting--
	head.turn = q.take(key, st, head.owner)
	close(head.done)
}

// Done ends the turn: the key's grant is no longer in flight, and the next
// waiter is served if the key is free. Later calls do nothing; a turn from
// before a Close/Open does nothing.
func (t *Turn) Done() {
	t.once.Do(func() {
		q := t.q
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.gen != t.gen {
			return
		}
		if st := q.keys[t.key]; st != nil && st.inflight {
			st.inflight = false
			st.inflightOwner = ""
			q.inflight--
		}
		q.kick(t.key)
	})
}

// Key returns the key the turn is for.
func (t *Turn) Key() string { return t.key }

// Waiting returns the number of requests waiting, over all keys.
func (q *Queue) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting
}

// Inflight returns the number of grant proposals holding a turn.
func (q *Queue) Inflight() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.inflight
}
