package waitq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/ticketd/ticketd/core"
)

// Sentinel errors of package waitq. Compare with errors.Is. Their texts
// carry no package prefix: the server sends them to clients as error
// messages (docs/api.md#errors), so they read as the user's terms.
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
	// ErrLimitMismatch: the request gave another semaphore limit than the
	// key's holders, grants in flight or waiters (every acquirer of a key
	// gives the same limit while it has any:
	// docs/semantics.md#modes-and-limits). Returned as a
	// *LimitMismatchError carrying the key's limit; the API maps it to
	// FailedPrecondition with a ticket.v1.LimitMismatch detail.
	ErrLimitMismatch = errors.New("limit mismatch")
	// ErrQueued: a request without wait would fit beside the key's holders
	// and grants in flight, but requests that wait are queued ahead of it
	// (a shared request behind a waiting writer: writer preference). It
	// fails at once rather than wait for their turns, which may last a whole
	// lease; unlike ErrHeld it claims nothing about the lock table. The API
	// maps it to Aborted.
	ErrQueued = errors.New("requests that wait are queued ahead (first in, first out; a waiting writer holds back later readers)")
)

// LimitMismatchError is the ErrLimitMismatch of a request whose limit differs
// from Limit, the key's current one (0: the key is a lock, exclusive or
// shared, not a semaphore). errors.Is(err, ErrLimitMismatch) is true for it.
// The server also makes one from the state machine's
// core.OutcomeLimitMismatch, the backstop when the table and the queue
// disagree (a grant from an earlier term that applied late).
type LimitMismatchError struct {
	// Key is the key asked for.
	Key string
	// Limit is the key's current semaphore limit (0: not a semaphore).
	Limit uint32
}

// Error implements error, naming the key's current limit.
func (e *LimitMismatchError) Error() string {
	if e.Limit == 0 {
		return fmt.Sprintf("key %q is held or awaited as a lock (limit 0): every acquirer must give limit 0 while it has holders or waiters", e.Key)
	}
	return fmt.Sprintf("key %q is a semaphore with limit %d: every acquirer must give limit %d while it has holders or waiters", e.Key, e.Limit, e.Limit)
}

// Is reports whether target is ErrLimitMismatch.
func (e *LimitMismatchError) Is(target error) bool { return target == ErrLimitMismatch }

// KeyState is what the lock table and the lessor say about a key (a key
// has a set of holders, with the key's mode and limit).
type KeyState struct {
	// Mode and Limit are the key's, from its holders (meaningful only when
	// Holders is not empty): core.ModeShared holders coexist; Limit > 0 makes
	// a semaphore of up to Limit holders (core.ModeExclusive in the table).
	Mode  core.Mode
	Limit uint32
	// Holders are the key's holders in the lock table, in token order.
	Holders []Holder
	// Delayed is true when the key is free but under a lock-delay (docs/design.md#lock-delay):
	// nobody may have it until the delay has passed (the server kicks then).
	Delayed bool
}

// Holder is one holder of a key, as KeyState reports it.
type Holder struct {
	// Owner is the holder's owner id (the same id requests give).
	Owner string
	// Removing is true when the holder is about to be removed: an Expire or
	// a ghost Release of it is proposed and not yet applied. Such a holder
	// still counts toward the key's capacity until it is gone, and is never
	// handed out again, not even to its own owner.
	Removing bool
	// Session is the session the holder is held under (0: none); a request
	// of the same owner under another session is not its retry
	// (ErrOwnerConflict).
	Session uint64
	// LockDelay is true when the holder asked for a lock-delay (docs/design.md#lock-delay).
	// While such a holder is being removed nothing is granted beside it
	// (a shared key's or a semaphore's free slot): its Expire may leave the
	// key free and under the delay before a grant proposed now applies.
	LockDelay bool
}

// Request is one Acquire as the queue sees it.
type Request struct {
	// Key is the key asked for; Owner the request's owner id (a retry of a
	// request reuses it).
	Key   string
	Owner string
	// Mode and Limit are the request's (core.ValidateMode checked them): an
	// exclusive lock (ModeExclusive, 0), a shared lock (ModeShared, 0), or a
	// semaphore slot (ModeExclusive, Limit > 0).
	Mode  core.Mode
	Limit uint32
	// Session is the session the grant is to be held under (0: none). With
	// Mode and Limit it must match what the owner already holds or is
	// acquiring on the key (ErrOwnerConflict).
	Session uint64
	// Wait is AcquireRequest.wait: queue when the key cannot be had now.
	Wait bool
	// Principal is the caller's principal ("" with authorization off: not
	// counted). The queue counts each principal's waiting requests.
	Principal string
	// Admit, if set, decides whether the request may join the queue as a
	// waiter when Principal already has waiting requests waiting on this
	// queue (over all keys): a non-nil error refuses it, and Enter returns
	// that error (a per-principal quota, docs/security.md#quotas). It is
	// called with the queue's locks held and must not call the queue. A
	// retry of a request in flight always gets its place, as with
	// MaxWaitersTotal.
	Admit func(waiting int) error
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

// Queue is the leader's per-key gate for grants: a grant is proposed only
// when it fits beside the key's holders and the grants already in flight
// (which count as holders of their mode), a key known full is never proposed
// for another owner, and requests that wait are served first-in first-out
// across modes. It is safe for concurrent use.
//
// A key's capacity (docs/semantics.md#modes-and-limits): an exclusive lock (ModeExclusive, limit 0)
// takes one holder; a shared lock any number of shared holders, none beside
// an exclusive one; a semaphore (limit > 0) Limit holders. Holders being
// removed count until they are gone, so a slot is never handed out twice.
//
// A Queue starts closed. Open it when the node becomes the promoted leader,
// Close it on demotion: every waiter then fails with ErrClosed and all
// per-key state is forgotten (a new leader rebuilds it from the lock table).
//
// Keys are spread over shards by a hash of the key, each with its own mutex
// and map (one global mutex was the server's most contended lock at 64
// clients in the benchmarks), so requests for different keys rarely wait
// for each other.
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
	// byPrincipal counts the waiting requests per principal (Request.Principal,
	// "" not counted), under pmu; taken after a shard's mutex.
	pmu         sync.Mutex
	byPrincipal map[string]int
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
	flights []*Turn // grant proposals holding a turn, in the order handed out
	// limit is the limit of the flights and waiters (all give the same:
	// Enter refuses another); meaningful while either list is not empty.
	limit     uint32
	queue     []*waiter
	tentative int // waiters in queue with tentative set
}

// idle reports whether the key has no grant in flight and no waiter.
func (st *keyState) idle() bool { return len(st.flights) == 0 && len(st.queue) == 0 }

type waiter struct {
	owner     string
	principal string // counted in Queue.byPrincipal while queued ("" never)
	mode      core.Mode
	limit     uint32
	session   uint64
	// tentative: a request without wait that the table alone did not refuse
	// but that could not be served at once; it fails with ErrHeld once the
	// table shows the key held incompatibly by another owner
	// (refuseTentative).
	tentative bool
	done      chan struct{} // closed when turn or err is set
	turn      *Turn
	err       error
}

// Turn is the right to propose one grant for a key. The holder must call Done
// exactly once when its proposal has resolved (applied or failed), after
// recording any removal it started (so that a same-owner retry waits for it).
// Until then the grant counts as a holder of its mode on the key.
type Turn struct {
	q         *Queue
	sh        *shard
	key       string
	owner     string
	principal string
	mode      core.Mode
	limit     uint32
	session   uint64
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
	q := &Queue{cfg: cfg, byPrincipal: map[string]int{}}
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
	q.pmu.Lock()
	clear(q.byPrincipal)
	q.pmu.Unlock()
}

// Enter asks for the turn to propose a grant of r.Key for r.Owner in r.Mode
// with r.Limit.
//
// A request whose owner holds the key (not being removed), or has a grant
// in flight or a request queued for it, with another mode, limit or session
// fails at once with an *OwnerConflictError, with or without wait: it is not
// a retry, and the state machine would answer it with the other holder's
// token (owner.go). A request whose limit differs from the key's (its
// holders', else its grants in flight and waiters') fails at once with a
// *LimitMismatchError carrying the key's limit, with or without wait. A mode that differs is not
// an error: the request waits (or, without wait, may be refused).
//
// It returns a Turn at once when nobody waits on the key and the grant fits
// beside the key's holders and grants in flight (see Queue), or when the key
// is held by r.Owner itself, not being removed, and no grant of r.Owner is
// in flight (a retry: the grant returns the same holder). A request whose
// owner matches a grant in flight or a holder being removed waits, with or
// without wait, so a retry never receives a token about to be released
// (docs/design.md#ghost-locks); such a retry keeps the place of the request in
// flight, at the head of the queue. Otherwise, with wait, a request joins the
// key's queue, first in first out across modes: it is served when every
// request ahead of it was served and its grant fits (writer preference: a
// waiting exclusive request holds back every shared request behind it).
//
// Without wait, it fails with ErrHeld only when the lock table shows the key
// held incompatibly with the request by another owner (an exclusive holder;
// any holder, for an exclusive request; a full semaphore) or under a
// lock-delay. When the table does not, and only the queue stands in the way
// (grants in flight, waiters queued ahead, a pipelined handoff whose Release
// applied before its Grant), the request waits as a tentative waiter in FIFO
// order: it fails with ErrHeld as soon as the table shows the key so held,
// or gets its turn, whichever comes first. Refusing earlier would report a
// state no linearizable read sees (a CheckToken between the refusal and the
// grant's apply would see the key free; docs/design.md#waiting-and-fairness).
// A tentative
// waiter counts toward MaxWaiters and MaxWaitersTotal like any waiter (it
// holds a goroutine and its request the same way); past them it fails with
// ErrFull, which claims nothing about the key.
//
// Errors: *OwnerConflictError (ErrOwnerConflict), *LimitMismatchError
// (ErrLimitMismatch), ErrHeld, ErrFull
// (MaxWaiters or MaxWaitersTotal reached), ErrClosed (not leader, or demoted
// while waiting), ctx.Err() (the waiter left the queue).
func (q *Queue) Enter(ctx context.Context, r Request) (*Turn, error) {
	key, owner := r.Key, r.Owner
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
	w := &waiter{owner: owner, principal: r.Principal, mode: r.Mode, limit: r.Limit, session: r.Session, done: make(chan struct{})}
	if err := ownerConflict(key, ks, st, w); err != nil {
		forget(sh, key, st)
		sh.mu.Unlock()
		return nil, err
	}
	if limit, known := keyLimit(ks, st); known && limit != r.Limit {
		forget(sh, key, st)
		sh.mu.Unlock()
		return nil, &LimitMismatchError{Key: key, Limit: limit}
	}
	if fits(ks, st, w) && (len(st.queue) == 0 || holds(ks, owner)) {
		t := q.take(sh, key, st, w)
		sh.mu.Unlock()
		return t, nil
	}
	retry := flying(st, owner) || removing(ks, owner)
	if !r.Wait && !retry && refused(ks, w) {
		forget(sh, key, st)
		sh.mu.Unlock()
		return nil, heldError(key, ks)
	}
	if !r.Wait && !retry && len(ks.Holders) > 0 && fits(ks, st, w) && waitersAhead(st) {
		// The request would join the key's holders, but waiting requests
		// stand in the way, and their turns may take a whole lease (a writer
		// waits for every reader to leave): a request without wait does not
		// wait for them. On a free key the waiters' turns are a Kick away,
		// and the request waits for them as a tentative waiter.
		forget(sh, key, st)
		sh.mu.Unlock()
		return nil, fmt.Errorf("key %q: %w", key, ErrQueued)
	}
	w.tentative = !r.Wait && !retry
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
	if err := q.admitPrincipal(w, r.Admit, retry); err != nil {
		q.waiting.Add(-1)
		forget(sh, key, st)
		sh.mu.Unlock()
		return nil, err
	}
	if w.tentative {
		st.tentative++
	}
	st.limit = r.Limit
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
				q.left(w)
				if w.tentative {
					st.tentative--
				}
				break
			}
		}
		q.kick(sh, key) // the next waiters may be servable now
	}
	sh.mu.Unlock()
	return nil, ctx.Err()
}

// take hands a turn of key to w's owner, in w's mode; sh.mu held.
func (q *Queue) take(sh *shard, key string, st *keyState, w *waiter) *Turn {
	t := &Turn{q: q, sh: sh, key: key, owner: w.owner, principal: w.principal, mode: w.mode, limit: w.limit, session: w.session, gen: q.gen}
	st.flights = append(st.flights, t)
	st.limit = w.limit
	q.inflight.Add(1)
	return t
}

// forget drops an idle key's state; sh.mu held.
func forget(sh *shard, key string, st *keyState) {
	if st.idle() {
		delete(sh.keys, key)
	}
}

// Kick re-examines key after a holder was removed (a Release or Expire
// applied) or its removal or lock-delay ended: waiters at the head of the
// queue get turns for as long as their grants fit (several shared waiters
// together; a semaphore's free slots one waiter each). Call it from the
// apply hook; it does not block.
func (q *Queue) Kick(key string) {
	sh := q.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	q.kick(sh, key)
}

// kick is Kick with sh.mu, key's shard, held. Tentative waiters fail first
// if the table shows the key held incompatibly (refuseTentative). Serving
// stops at the first waiter whose grant does not fit: FIFO across modes.
func (q *Queue) kick(sh *shard, key string) {
	st := sh.keys[key]
	if !q.open || st == nil {
		return
	}
	if len(st.queue) == 0 {
		forget(sh, key, st)
		return
	}
	ks := q.cfg.State(key)
	q.refuseTentative(key, st, ks)
	for len(st.queue) > 0 && fits(ks, st, st.queue[0]) {
		q.serveHead(sh, key, st)
	}
	forget(sh, key, st)
}

// heldError is the ErrHeld a request without wait gets for key, saying how
// the lock table holds it (ks), in the user's terms.
func heldError(key string, ks KeyState) error {
	n := len(ks.Holders)
	switch {
	case n == 0 && ks.Delayed:
		return fmt.Errorf("key %q is %w: free, but under the lock-delay of an expired holder", key, ErrHeld)
	case ks.Limit > 0:
		return fmt.Errorf("key %q is %w: a semaphore with all %d slots taken", key, ErrHeld, ks.Limit)
	case ks.Mode == core.ModeShared:
		return fmt.Errorf("key %q is %w: shared by %d readers", key, ErrHeld, n)
	}
	return fmt.Errorf("key %q is %w", key, ErrHeld)
}

// refuseTentative fails with ErrHeld every tentative waiter of key that the
// table ks now refuses (refused): the table shows the key held incompatibly
// by another owner between the waiter's arrival and its answer, so the
// refusal is linearizable. st's shard mutex held.
func (q *Queue) refuseTentative(key string, st *keyState, ks KeyState) {
	if st.tentative == 0 || (len(ks.Holders) == 0 && !ks.Delayed) {
		return
	}
	keep := st.queue[:0]
	for _, w := range st.queue {
		if !w.tentative || !refused(ks, w) {
			keep = append(keep, w)
			continue
		}
		w.err = heldError(key, ks)
		close(w.done)
		st.tentative--
		q.left(w)
	}
	clear(st.queue[len(keep):])
	st.queue = keep
}

// serveHead hands a turn to the head waiter of key; sh.mu held.
func (q *Queue) serveHead(sh *shard, key string, st *keyState) *Turn {
	head := st.queue[0]
	st.queue[0] = nil
	st.queue = st.queue[1:]
	q.left(head)
	if head.tentative {
		st.tentative--
	}
	head.turn = q.take(sh, key, st, head)
	close(head.done)
	return head.turn
}

// Done ends the turn: the key's grant is no longer in flight, and the next
// waiters are served if their grants fit. Later calls do nothing; a turn
// from before a Close/Open does nothing.
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

// end removes t from the key's grants in flight; t.sh.mu held, t of this
// generation.
func (q *Queue) end(t *Turn) {
	st := t.sh.keys[t.key]
	if st == nil {
		return
	}
	for i, x := range st.flights {
		if x == t {
			st.flights = append(st.flights[:i], st.flights[i+1:]...)
			q.inflight.Add(-1)
			return
		}
	}
}

// admitPrincipal counts w as one more waiting request of its principal,
// asking admit first (unless the request is a retry, which keeps its
// place). It returns admit's error, counting nothing. The caller holds w's
// shard mutex and has counted w in q.waiting.
func (q *Queue) admitPrincipal(w *waiter, admit func(int) error, retry bool) error {
	if w.principal == "" {
		return nil
	}
	q.pmu.Lock()
	defer q.pmu.Unlock()
	if admit != nil && !retry {
		if err := admit(q.byPrincipal[w.principal]); err != nil {
			return err
		}
	}
	q.byPrincipal[w.principal]++
	return nil
}

// left uncounts w, which stopped waiting (served, refused, gone).
func (q *Queue) left(w *waiter) {
	q.waiting.Add(-1)
	if w.principal == "" {
		return
	}
	q.pmu.Lock()
	defer q.pmu.Unlock()
	if q.byPrincipal[w.principal]--; q.byPrincipal[w.principal] <= 0 {
		delete(q.byPrincipal, w.principal)
	}
}

// PrincipalWaiting returns the requests of principal waiting on this queue,
// over all keys.
func (q *Queue) PrincipalWaiting(principal string) int {
	q.pmu.Lock()
	defer q.pmu.Unlock()
	return q.byPrincipal[principal]
}

// PrincipalCounts returns a copy of the waiting requests per principal.
func (q *Queue) PrincipalCounts() map[string]int {
	q.pmu.Lock()
	defer q.pmu.Unlock()
	return maps.Clone(q.byPrincipal)
}

// Key returns the key the turn is for.
func (t *Turn) Key() string { return t.key }

// Waiting returns the number of requests waiting, over all keys. It takes no
// lock.
func (q *Queue) Waiting() int { return int(q.waiting.Load()) }

// Inflight returns the number of grant proposals holding a turn. It takes no
// lock (Acquire reads it on every request for the lock-table limit).
func (q *Queue) Inflight() int { return int(q.inflight.Load()) }
