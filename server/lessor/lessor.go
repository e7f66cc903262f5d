package lessor

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/core"
)

// Sentinel errors of package lessor. Compare with errors.Is.
var (
	// ErrNotPrimary: this node's lessor is not primary (the node is not the
	// promoted leader), so it neither renews nor expires. Retry on the leader.
	ErrNotPrimary = errors.New("lessor: not primary")
	// ErrNotHeld: no lock is held on the key with the given token.
	ErrNotHeld = errors.New("lessor: no lock with that token")
	// ErrExpired: the lock's lease has run out (its deadline passed, or an
	// Expire for it was proposed); it cannot be renewed.
	ErrExpired = errors.New("lessor: lease expired")
	// ErrClosed: the lessor was closed.
	ErrClosed = errors.New("lessor: closed")
)

// Table is the read side of the lock table the lessor promotes from;
// *core.StateMachine meets it.
type Table interface {
	// Ascend calls fn for every held lock in key order until fn returns false.
	Ascend(fn func(core.Lock) bool)
}

// Config configures a Lessor. Confirm and Expire are required.
type Config struct {
	// Clock measures deadlines; nil means RealClock().
	Clock Clock
	// Confirm confirms this node's leadership with a quorum after the call
	// began and returns the term it confirmed (core.TermConfirmer, or
	// core.Consensus.ReadIndex with the term read around it). It is called
	// before every renewal and before every batch of Expire proposals; the
	// lessor acts on the answer only while the epoch it started in lasts and
	// the confirmed term is the one Promote was given, so a deposed leader
	// neither extends nor ends a lease (DESIGN.md, Leases).
	Confirm func(ctx context.Context) (term uint64, err error)
	// Expire proposes core.Expire(key, token) and returns once it applied
	// locally or failed. Called from lessor goroutines, never with a lock
	// held; from the decision until it returns the lock is "proposing": it is
	// never renewed nor handed back to a retry, in any epoch (see Promote).
	Expire func(ctx context.Context, key string, token uint64) error
	// RetryInterval is how long after a failed Confirm or Expire proposal the
	// lessor proposes the expiry again; default 500ms. The lock stays marked
	// expiring meanwhile, so it cannot be renewed.
	RetryInterval time.Duration
	// ProposeTimeout bounds one Confirm + Expire round; default 5s.
	ProposeTimeout time.Duration
	// Logger receives expiry logs; nil means zap.NewNop().
	Logger *zap.Logger
}

// DefaultConfig returns a Config with the optional fields at their defaults.
func DefaultConfig() Config {
	return Config{RetryInterval: 500 * time.Millisecond, ProposeTimeout: 5 * time.Second}
}

// Validate reports a missing required field.
func (c Config) Validate() error {
	if c.Confirm == nil || c.Expire == nil {
		return errors.New("lessor: Confirm and Expire are required")
	}
	if c.RetryInterval < 0 || c.ProposeTimeout < 0 {
		return errors.New("lessor: negative interval")
	}
	return nil
}

// item is one lease the primary lessor tracks.
type item struct {
	key      string
	token    uint64
	leaseMS  int64
	deadline time.Time // local monotonic deadline; meaningful only while primary
	expiring bool      // an Expire was (or is about to be) proposed: never renew
	index    int       // position in the deadline heap, -1 when not in it
}

// Lessor keeps the lease deadlines of held locks on the leader and expires
// them. It follows etcd's lessor (server/lease/lessor.go): deadlines exist only
// on the primary (the promoted leader); Promote gives every held lock a fresh
// full lease, Demote forgets all deadlines; expiry is a replicated command
// (Expire{key, token}) proposed by the primary, never a local deletion.
//
// Renew and expiry are decided here, under one mutex: once a lock is marked
// expiring, or its deadline has passed, Renew refuses it.
//
// All methods are safe for concurrent use. Granted and Removed are called
// from the backend's apply hook and do not block.
type Lessor struct {
	cfg Config
	log *zap.Logger

	mu        sync.Mutex
	primary   bool
	epoch     uint64 // bumped by Promote and Demote: work of an older epoch is dropped
	term      uint64 // the Raft term Promote was given; Confirm must confirm it
	items     map[string]*item
	due       deadlineHeap
	proposing map[lockID]int // Expire calls in flight, across epochs
	closed    bool

	wake chan struct{}
	stop chan struct{}
	ctx  context.Context // cancelled by Close: bounds Confirm and Expire calls
	quit context.CancelFunc
	wg   sync.WaitGroup
}

// New returns a non-primary Lessor and starts its expiry loop. Close stops it.
func New(cfg Config) (*Lessor, error) {
	d := DefaultConfig()
	if cfg.Clock == nil {
		cfg.Clock = RealClock()
	}
	if cfg.RetryInterval == 0 {
		cfg.RetryInterval = d.RetryInterval
	}
	if cfg.ProposeTimeout == 0 {
		cfg.ProposeTimeout = d.ProposeTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, quit := context.WithCancel(context.Background())
	l := &Lessor{
		cfg:       cfg,
		log:       cfg.Logger,
		items:     map[string]*item{},
		proposing: map[lockID]int{},
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		ctx:       ctx,
		quit:      quit,
	}
	l.wg.Add(1)
	go l.run()
	return l, nil
}

// Promote makes the lessor primary for the Raft term term. Call it only
// after this node's barrier entry of that term has applied
// (core.LeaderEvent.IsLeader), so every earlier Release and Expire is in
// table. Every held lock gets the deadline now + lease_ms: a lease may outlive
// its nominal end after a failover, never end early (etcd lessor Promote;
// Chubby's grace period) — except a lock whose Expire, decided in an earlier
// epoch, is still being proposed: it stays expiring (never renewed, never
// handed back), since that Expire may yet commit in this term.
func (l *Lessor) Promote(table Table, term uint64) {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.epoch++
	l.term = term
	l.primary = true
	l.items = map[string]*item{}
	l.due = nil
	table.Ascend(func(lk core.Lock) bool {
		it := &item{key: lk.Key, token: lk.Token, leaseMS: lk.LeaseMS, deadline: now.Add(ms(lk.LeaseMS)), index: -1}
		l.items[lk.Key] = it
		if l.proposing[lockID{lk.Key, lk.Token}] > 0 {
			it.expiring = true // re-armed when that proposal fails (settle)
			return true
		}
		heap.Push(&l.due, it)
		return true
	})
	l.kick()
}

// Demote makes the lessor non-primary: every deadline is forgotten, no timer
// fires, in-flight expiry work of the old term is dropped (etcd lessor Demote).
func (l *Lessor) Demote() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.epoch++
	l.primary = false
	l.items = map[string]*item{}
	l.due = nil
	l.kick()
}

// Primary reports whether the lessor is primary.
func (l *Lessor) Primary() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.primary
}

// Granted records that a Grant for key applied locally with token and a lease
// of leaseMS milliseconds; the deadline is measured from now (the local apply).
// A grant that returned the lock already tracked with that token (a retried
// request with the same owner) changes nothing here: the retry's own path
// decides with Regrant whether it may have the lock. It does nothing when not
// primary.
func (l *Lessor) Granted(key string, token uint64, leaseMS int64) {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.primary {
		return
	}
	deadline := now.Add(ms(leaseMS))
	if it, ok := l.items[key]; ok {
		if it.token == token {
			return
		}
		l.remove(it)
	}
	it := &item{key: key, token: token, leaseMS: leaseMS, deadline: deadline, index: -1}
	l.items[key] = it
	heap.Push(&l.due, it)
	if it.index == 0 {
		l.kick()
	}
}

// Removed records that the lock (key, token) was deleted (a Release or an
// Expire applied). A different token on key is left alone. No-op when not primary.
func (l *Lessor) Removed(key string, token uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if it, ok := l.items[key]; ok && it.token == token {
		l.remove(it)
	}
}

// remove deletes it from items and the heap; l.mu held.
func (l *Lessor) remove(it *item) {
	delete(l.items, it.key)
	if it.index >= 0 {
		heap.Remove(&l.due, it.index)
	}
}

// Regrant decides, atomically with expiry, whether an idempotent retry of
// Acquire (a Grant that returned the lock its owner already held, token) may
// be answered with that lock. If an Expire for (key, token) has been decided
// or proposed, or its deadline has passed, it fails with ErrExpired: the
// retry must wait for the removal and take a fresh grant (issue 14, race 1).
// Otherwise it restarts the deadline at now + leaseMS (the retry acknowledges
// a lease measured from its own send time, which is before now) and returns
// nil; an expiry round that decided before this call cannot have marked the
// lock (it would be expiring), and one deciding later sees the new deadline.
//
// Errors: ErrExpired, ErrNotHeld (the lessor does not track the lock: it was
// removed), ErrNotPrimary, ErrClosed.
func (l *Lessor) Regrant(key string, token uint64, leaseMS int64) error {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	it, err := l.renewable(key, token, now)
	if err != nil {
		return err
	}
	if d := now.Add(ms(leaseMS)); d.After(it.deadline) {
		it.deadline = d
		heap.Fix(&l.due, it.index)
	}
	return nil
}

// Renew extends the lease of (key, token) to now + lease_ms and returns
// lease_ms. It first confirms leadership with a quorum (Config.Confirm), so a
// deposed leader never extends a lease its successor does not know about, and
// measures the new deadline after that confirmation (never earlier than the
// client's send time).
//
// Errors: ErrNotPrimary (not the promoted leader, or leadership changed during
// the call), ErrNotHeld, ErrExpired (deadline passed or Expire proposed), or
// Confirm's error (a *core.NotLeaderError, ctx.Err()).
func (l *Lessor) Renew(ctx context.Context, key string, token uint64) (int64, error) {
	l.mu.Lock()
	epoch := l.epoch
	_, err := l.renewable(key, token, l.cfg.Clock.Now())
	l.mu.Unlock()
	if errors.Is(err, ErrClosed) || errors.Is(err, ErrNotPrimary) {
		return 0, err
	}
	// Confirm before any answer, a refusal included: a deposed leader that was
	// paused past a lease holds a stale table, and its "not held" would deny a
	// lock its successor granted. The answer comes from the re-check below.
	term, err := l.cfg.Confirm(ctx)
	if err != nil {
		return 0, err
	}
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.epoch != epoch || term != l.term {
		return 0, ErrNotPrimary
	}
	it, err := l.renewable(key, token, now)
	if err != nil {
		return 0, err
	}
	it.deadline = now.Add(ms(it.leaseMS))
	heap.Fix(&l.due, it.index)
	return it.leaseMS, nil
}

// renewable returns the item for (key, token) if it may be renewed at now; l.mu held.
func (l *Lessor) renewable(key string, token uint64, now time.Time) (*item, error) {
	switch it, ok := l.items[key]; {
	case l.closed:
		return nil, ErrClosed
	case !l.primary:
		return nil, ErrNotPrimary
	case !ok || it.token != token:
		return nil, fmt.Errorf("%w: key %q token %d", ErrNotHeld, key, token)
	case it.expiring || !now.Before(it.deadline) || l.proposing[lockID{key, token}] > 0:
		return nil, fmt.Errorf("%w: key %q token %d", ErrExpired, key, token)
	default:
		return it, nil
	}
}

// Remaining returns how long the lease of (key, token) has left (0 once the
// deadline passed or it is expiring) and true, or false when the lessor is not
// primary or does not track that lock.
func (l *Lessor) Remaining(key string, token uint64) (time.Duration, bool) {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	it, ok := l.items[key]
	if !l.primary || !ok || it.token != token {
		return 0, false
	}
	if it.expiring || !now.Before(it.deadline) {
		return 0, true
	}
	return it.deadline.Sub(now), true
}

// Expiring reports whether the primary lessor has ended the lease of (key,
// token): its deadline passed or an Expire for it was proposed. Such a lock is
// about to be removed and must not be handed out again.
func (l *Lessor) Expiring(key string, token uint64) bool {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	it, ok := l.items[key]
	return l.primary && ok && it.token == token && (it.expiring || !now.Before(it.deadline))
}

// Len returns the number of leases tracked (0 when not primary).
func (l *Lessor) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.items)
}

// Close stops the expiry loop and waits for in-flight expiry work. Safe to
// call more than once.
func (l *Lessor) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.primary = false
	l.epoch++
	l.mu.Unlock()
	close(l.stop)
	l.quit()
	l.wg.Wait()
	return nil
}

// kick wakes the expiry loop without blocking; l.mu held or not.
func (l *Lessor) kick() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// lockID names one lock: its key and the token of its grant.
type lockID struct {
	key   string
	token uint64
}

// dueLease is one lease whose deadline passed, handed to the expiry worker.
type dueLease = lockID

// run is the expiry loop: it sleeps until the earliest deadline, marks every
// lease past its deadline expiring, and hands them to an expiry worker.
func (l *Lessor) run() {
	defer l.wg.Done()
	for {
		batch, epoch, wait := l.collect()
		if len(batch) > 0 {
			l.wg.Add(1)
			go l.expire(epoch, batch)
		}
		var timerC <-chan time.Time
		var timer Timer
		if wait >= 0 {
			timer = l.cfg.Clock.NewTimer(wait)
			timerC = timer.C()
		}
		select {
		case <-timerC:
		case <-l.wake:
		case <-l.stop:
			if timer != nil {
				timer.Stop()
			}
			return
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// collect pops every lease past its deadline, marking it expiring, and returns
// them with the epoch and the wait until the next deadline (-1: none).
func (l *Lessor) collect() ([]dueLease, uint64, time.Duration) {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.primary {
		return nil, l.epoch, -1
	}
	var batch []dueLease
	for len(l.due) > 0 && !now.Before(l.due[0].deadline) {
		it := heap.Pop(&l.due).(*item)
		it.expiring = true
		batch = append(batch, dueLease{key: it.key, token: it.token})
	}
	if len(l.due) == 0 {
		return batch, l.epoch, -1
	}
	return batch, l.epoch, l.due[0].deadline.Sub(now)
}

// expire confirms leadership once for the batch, then proposes every Expire
// concurrently (they share group commits). A round whose epoch ended, or whose
// confirmation names another term than the epoch's, proposes nothing (issue
// 14, race 3); each Expire is decided again under the lessor's lock just
// before it is proposed (decide). Failures are retried after RetryInterval
// while the epoch lasts; the leases stay expiring meanwhile.
func (l *Lessor) expire(epoch uint64, batch []dueLease) {
	defer l.wg.Done()
	ctx, cancel := context.WithTimeout(l.ctx, l.cfg.ProposeTimeout)
	defer cancel()
	term, err := l.cfg.Confirm(ctx)
	if err != nil {
		l.log.Debug("lessor: confirm before expiry failed", zap.Int("leases", len(batch)), zap.Error(err))
		l.retry(epoch, batch)
		return
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []dueLease
	for _, d := range batch {
		if !l.decide(epoch, term, d) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := l.cfg.Expire(ctx, d.key, d.token)
			l.settle(epoch, d, err)
			if err != nil {
				l.log.Debug("lessor: expire proposal failed", zap.String("key", d.key), zap.Uint64("token", d.token), zap.Error(err))
				mu.Lock()
				failed = append(failed, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		l.retry(epoch, failed)
	}
}

// decide reports, under the lessor's lock, whether the Expire of d may be
// proposed now: the round's epoch is the current one, its confirmation
// confirmed this epoch's term, and the lock is still tracked with that token,
// marked expiring and past its current deadline. If so the lock is marked
// proposing until settle: whatever epoch the proposal ends up committing in,
// no renewal or retry is granted meanwhile.
func (l *Lessor) decide(epoch, term uint64, d dueLease) bool {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	it, ok := l.items[d.key]
	if l.closed || !l.primary || l.epoch != epoch || l.term != term ||
		!ok || it.token != d.token || !it.expiring || now.Before(it.deadline) {
		return false
	}
	l.proposing[d]++
	return true
}

// settle ends the proposing mark of d after its Expire returned with err. A
// failed proposal of an older epoch re-arms the lock in the current epoch at
// once if Promote kept it expiring because of this proposal: its lease ended
// by the measure of the last renewal anyone acknowledged, since none was
// acknowledged after the decision.
func (l *Lessor) settle(epoch uint64, d dueLease, err error) {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.proposing[d]--; l.proposing[d] <= 0 {
		delete(l.proposing, d)
	}
	if err == nil || l.epoch == epoch || !l.primary || l.proposing[d] > 0 {
		return
	}
	if it, ok := l.items[d.key]; ok && it.token == d.token && it.expiring && it.index < 0 {
		it.deadline = now
		heap.Push(&l.due, it)
		l.kick()
	}
}

// retry re-arms the still-tracked, still-expiring leases of batch for another
// expiry attempt after RetryInterval, if the epoch is unchanged.
func (l *Lessor) retry(epoch uint64, batch []dueLease) {
	if l.ctx.Err() != nil {
		return
	}
	deadline := l.cfg.Clock.Now().Add(l.cfg.RetryInterval)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.epoch != epoch || !l.primary {
		return
	}
	for _, d := range batch {
		it, ok := l.items[d.key]
		if !ok || it.token != d.token || it.index >= 0 {
			continue
		}
		it.deadline = deadline
		heap.Push(&l.due, it)
	}
	l.kick()
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// deadlineHeap is a min-heap of items by deadline (container/heap).
type deadlineHeap []*item

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *deadlineHeap) Push(x any) {
	it := x.(*item)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	n := len(old)
	it := old[n-1]
	old[n-1] = nil
	it.index = -1
	*h = old[:n-1]
	return it
}
