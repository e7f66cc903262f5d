package lessor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/core"
)

// Sentinel errors of package lessor. Compare with errors.Is. Their texts
// carry no package prefix: the server sends them to clients as error
// messages (docs/api.md#errors), so they read as the user's terms.
var (
	// ErrNotPrimary: this node's lessor is not primary (the node is not the
	// promoted leader), so it neither admits renewals nor expires. Retry on
	// the leader.
	ErrNotPrimary = errors.New("this node is not the leader")
	// ErrNotHeld: no lock is held on the key with the given token. Its text
	// is in the user's terms (clients see it as the NotFound message).
	ErrNotHeld = errors.New("lease expired or released")
	// ErrExpired: the lock's lease has run out (its deadline passed, or an
	// Expire for it was decided or proposed); it cannot be renewed.
	ErrExpired = errors.New("lease expired")
	// ErrClosed: the lessor was closed.
	ErrClosed = errors.New("node is shutting down")
)

// Table is the read side of the lock table the lessor reconciles with;
// *core.StateMachine meets it. Its methods must be safe to call concurrently
// with Apply.
type Table interface {
	// Ascend calls fn for every holder in key and token order until fn
	// returns false.
	Ascend(fn func(core.Lock) bool)
	// AscendSessions calls fn for every open session in id order until fn
	// returns false.
	AscendSessions(fn func(core.Session) bool)
	// AscendLockDelays calls fn for every lock-delay record in key order
	// until fn returns false.
	AscendLockDelays(fn func(core.LockDelay) bool)
	// AppliedIndex is the log index of the last applied entry.
	AppliedIndex() uint64
	// Restores counts the snapshots restored into the table: the lessor
	// rebuilds from the table only when it changed since its last rebuild
	// (Resync), never because of a gap in the applied indexes
	// (docs/design.md#replicated-commands).
	Restores() uint64
}

// Config configures a Lessor. Confirm, Expire and ExpireSession are required.
type Config struct {
	// Clock measures deadlines; nil means RealClock().
	Clock Clock
	// Confirm confirms this node's leadership with a quorum after the call
	// began and returns the term it confirmed (core.TermConfirmer, part of
	// every backend's core.Consensus). It is called
	// before every batch of Expire proposals; the lessor acts on the answer
	// only while the epoch it started in lasts and the confirmed term is the
	// one Promote was given, so a deposed leader never ends a lease
	// (docs/design.md#leases).
	Confirm func(ctx context.Context) (term uint64, err error)
	// Expire proposes core.ExpireSeen(key, token, seenIndex) and returns once
	// it applied locally or failed. seenIndex is the log index of the lock's
	// last Grant or Renew this node applied, so a renewal that commits
	// between the decision and the Expire's apply wins
	// (docs/design.md#replicated-commands). Called
	// from lessor goroutines, never with a lock held; from the decision until
	// it returns the lock is "proposing": the leader admits no renewal nor
	// retry of it, in any epoch (see Promote).
	Expire func(ctx context.Context, key string, token, seenIndex uint64) error
	// ExpireSession proposes core.ExpireSession(id, seenIndex) and returns
	// once it applied locally or failed; seenIndex is the log index of the
	// session's CreateSession or last KeepAliveSession this node applied.
	// Called like Expire, with the same "proposing" state for the session
	// (docs/design.md#sessions; etcd lessor revoke on expiry, Consul session TTL).
	ExpireSession func(ctx context.Context, id, seenIndex uint64) error
	// OnDelayEnd, if set, is called (from the lessor's loop, without a lock
	// held) when the lock-delay of key has passed on this node's clock, so
	// that queued Acquires can be served. It must not block.
	OnDelayEnd func(key string)
	// RetryInterval is how long after a failed Confirm or Expire proposal the
	// lessor proposes the expiry again; default 500ms. The lock stays marked
	// expiring meanwhile, so it cannot be renewed.
	RetryInterval time.Duration
	// ProposeTimeout bounds one Confirm + Expire round; default 5s.
	ProposeTimeout time.Duration
	// MaxInFlight bounds the Expire and ExpireSession proposals in flight at
	// once, across rounds; default 256. They are proposed concurrently so
	// that they share group commits (docs/design.md#the-consensus-contract):
	// a round of a million due leases runs through this many workers rather
	// than a goroutine per lease.
	MaxInFlight int
	// Logger receives expiry logs; nil means zap.NewNop().
	Logger *zap.Logger
	// AppliedAt, if set, returns a time on Clock by which an earlier run of
	// this node had already applied the log index index, and true
	// (applytime.Record.At); false when no earlier run applied it. A lease
	// whose last Grant or Renew (CreateSession or KeepAliveSession) is at
	// such an index is measured from that time instead of from this run's
	// replay of it: still after the client sent it (never early), and no
	// later than one bucket after this node first applied it, so a restart
	// does not stretch the lease (docs/design.md#leases).
	AppliedAt func(index uint64) (time.Time, bool)
}

// DefaultConfig returns a Config with the optional fields at their defaults.
func DefaultConfig() Config {
	return Config{RetryInterval: 500 * time.Millisecond, ProposeTimeout: 5 * time.Second, MaxInFlight: 256}
}

// Validate reports a missing required field.
func (c Config) Validate() error {
	if c.Confirm == nil || c.Expire == nil || c.ExpireSession == nil {
		return errors.New("lessor: Confirm, Expire and ExpireSession are required")
	}
	if c.RetryInterval < 0 || c.ProposeTimeout < 0 {
		return errors.New("lessor: negative interval")
	}
	if c.MaxInFlight < 0 {
		return errors.New("lessor: negative MaxInFlight")
	}
	return nil
}

// item is one lease the lessor tracks: a lock holder's own, or a session's.
//
// The lessor keeps one per held lock, so its size is a cost per lock
// (docs/benchmarks.md#scale-a-million-locks): times are mono (8 bytes, not
// a time.Time's 24) and the heap position an int32, which with leaseID's
// 24 bytes fits the 64-byte allocation class.
type item struct {
	id       leaseID
	leaseMS  int64
	deadline mono   // this node's apply of the last Grant/Renew (KeepAlive) + lease_ms
	due      mono   // when the expiry loop next looks at it: deadline, or a retry's time
	seen     uint64 // log index of that Grant/Renew: the Expire's seen_index
	index    int32  // position in the deadline heap, -1 when not in it
	expiring bool   // primary only: an Expire was (or is about to be) decided; never renew
}

// Lessor tracks the lease deadline of every held lock on every node, and
// expires them on the leader. It follows etcd's lessor
// (server/lease/lessor.go) for Promote/Demote and leader-only expiry by a
// replicated command, and goes past it (docs/design.md#leases): every node measures each
// lock's deadline from its own local apply of the lock's last Grant or Renew
// (Track), so a new leader expires by the deadlines it already has, with no
// reset at promotion, and an unrenewed lock ends within lease_ms + one
// election and barrier + one expiry round after its last acknowledged
// Grant/Renew, whatever the number of failovers.
//
// Renewal admission and expiry are decided here, under one mutex: once a lock
// is marked expiring, or its deadline has passed, Renewable refuses it. The
// removals the leader decides elsewhere (ghost Releases, CloseSessions) are
// marked under the same mutex, so that Ending answers whether a holder is
// being removed in one call (ending.go).
//
// Sessions (docs/design.md#sessions; etcd leases, Consul sessions) are timed the same way
// (TrackSession, ExpireSession proposals); a holder under a session
// (TrackUnder) has no lease of its own: every question about it (Renewable,
// Regrant, Remaining, Expiring) is answered by its session's lease.
//
// All methods are safe for concurrent use. Track, Removed, Delay and
// Reconcile are called from the backend's apply hook and do not block.
type Lessor struct {
	cfg  Config
	log  *zap.Logger
	base time.Time // the Clock's reading at New: what every mono counts from

	mu        sync.Mutex
	primary   bool
	epoch     uint64            // bumped by Promote and Demote: work of an older epoch is dropped
	term      uint64            // the Raft term Promote was given; Confirm must confirm it
	office    time.Time         // when Promote last made this lessor primary (lateness.go)
	items     leaseMap          // locks timed on their own, and sessions
	sessions  int               // how many of items are sessions
	under     map[lockID]uint64 // holders under a session: holder -> session
	members   map[uint64]map[lockID]struct{}
	due       deadlineHeap        // items waiting for an expiry round, by due time
	marked    map[leaseID]*item   // the items marked expiring: all that Promote re-arms
	proposing map[leaseID]int     // Expire calls in flight, across epochs
	delays    map[string]*delay   // lock-delays by key, also in ends
	ends      delayHeap           // the lock-delays by end time
	ghosts    map[lockID]struct{} // ghost holders whose Release is in flight (ending.go)
	closing   map[uint64]int      // CloseSession proposals in flight per session (ending.go)
	closed    bool

	restores   atomic.Uint64 // the table's Restores() at the last reconcile; written with mu held
	reconciles atomic.Uint64 // full reconciles done (Reconciles)
	loads      atomic.Uint64 // of those, direct loads into a lessor that tracked nothing (Loads)
	slots      chan struct{} // one token per Expire proposal in flight (MaxInFlight)

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
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = d.MaxInFlight
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
		base:      cfg.Clock.Now(),
		log:       cfg.Logger,
		items:     newLeaseMap(0, 0),
		under:     map[lockID]uint64{},
		members:   map[uint64]map[lockID]struct{}{},
		marked:    map[leaseID]*item{},
		proposing: map[leaseID]int{},
		delays:    map[string]*delay{},
		ghosts:    map[lockID]struct{}{},
		closing:   map[uint64]int{},
		slots:     make(chan struct{}, cfg.MaxInFlight),
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
// (core.LeaderEvent.IsLeader), so every earlier command is applied and
// tracked. There is no reset: every lock keeps the deadline this node
// measured from its own apply of the lock's last Grant or Renew, which is at
// or after the deadline its client measured (docs/design.md#leases). A lock whose Expire,
// decided in an earlier epoch, is still being proposed stays expiring (never
// renewed, never handed back), since that Expire may yet commit in this
// term; every other lock is expired by its deadline, at once if it has
// passed.
//
// Its work is proportional to what changed since this node last led, not
// to the table (docs/design.md#leases): every node keeps every unmarked
// lease in the deadline heap at its deadline from its own apply, so only the
// leases marked expiring in an earlier epoch (marked) and those with an
// Expire in flight (proposing) need re-arming. The table is read in full
// only if a snapshot was restored into it that Reconcile has not seen
// (Resync), which the server's restore hook normally has done already.
func (l *Lessor) Promote(table Table, term uint64) {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if table.Restores() != l.restores.Load() {
		l.reconcile(table, now)
	}
	l.epoch++
	l.term = term
	l.primary = true
	l.office = now
	for id := range l.proposing {
		if it, ok := l.items.get(id); ok {
			l.mark(it) // re-armed when that proposal fails (settle)
			l.unqueue(it)
		}
	}
	for id, it := range l.marked {
		if l.proposing[id] > 0 {
			continue
		}
		l.unmark(it)
		it.due = it.deadline
		l.enqueue(it)
	}
	l.kick()
}

// mark marks it expiring: no renewal is admitted, and the next Promote
// re-arms it unless its Expire is still in flight; l.mu held.
func (l *Lessor) mark(it *item) {
	it.expiring = true
	l.marked[it.id] = it
}

// unmark clears the expiring mark of it; l.mu held. An unmarked item is in
// the deadline heap, due at its deadline (track, Promote), on every node.
func (l *Lessor) unmark(it *item) {
	it.expiring = false
	delete(l.marked, it.id)
}

// Demote makes the lessor non-primary: no expiry is decided, in-flight expiry
// work of the old term is dropped (etcd lessor Demote). Deadlines stay
// tracked: a follower keeps measuring them for when it leads again.
func (l *Lessor) Demote() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.epoch++
	l.primary = false
	l.kick()
}

// Primary reports whether the lessor is primary.
func (l *Lessor) Primary() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.primary
}

// Track records that the lock (key, token) with a lease of leaseMS
// milliseconds had a Grant or Renew applied locally at log index index: its
// deadline becomes now + leaseMS on this node's monotonic clock and index
// its seen index. Call it for a Grant that created a lock, for an idempotent
// retry Grant (which restarts the lease in the replicated state, like a
// Renew) and for a Renew, on every node. Every holder of a key (shared locks,
// semaphores) is tracked on its own; the key's lock-delay, if any, ends (a
// grant clears it in core). A holder under a session (TrackUnder) is skipped:
// its session times it. A lock marked expiring becomes unmarked: its
// in-flight Expire carries an older seen index and will not remove it. Does
// not block.
func (l *Lessor) Track(key string, token uint64, leaseMS int64, index uint64) {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clearDelay(key)
	if _, ok := l.under[lockID{key, token}]; ok {
		return
	}
	l.track(lockLease(key, token), leaseMS, index, l.start(index, now).Add(ms(leaseMS)))
}

// start returns when this node first applied index: now, or the earlier
// time an earlier run recorded (Config.AppliedAt) when this apply is a
// replay after a restart.
func (l *Lessor) start(index uint64, now time.Time) time.Time {
	if l.cfg.AppliedAt == nil {
		return now
	}
	if t, ok := l.cfg.AppliedAt(index); ok && t.Before(now) {
		return t
	}
	return now
}

// track sets the lease id to deadline with seen index; l.mu held.
func (l *Lessor) track(id leaseID, leaseMS int64, index uint64, deadline time.Time) {
	it, ok := l.items.get(id)
	if !ok {
		it = &item{id: id, index: -1}
		l.items.put(it)
		if id.session() != 0 {
			l.sessions++
		}
	}
	it.leaseMS, it.seen, it.deadline = leaseMS, index, l.mono(deadline)
	it.due = it.deadline
	l.unmark(it)
	l.enqueue(it)
	if it.index == 0 {
		l.kick()
	}
}

// Removed records that the holder (key, token) was deleted (a Release
// applied, an Expire that removed it, or its session's end); its ghost mark,
// if any, goes with it (MarkGhost). Other holders of key are left alone; an
// Expire that did not remove the lock (Existed false: renewed since its
// decision) must not be reported.
func (l *Lessor) Removed(key string, token uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if it, ok := l.items.get(lockLease(key, token)); ok {
		l.remove(it)
	}
	l.detach(lockID{key, token})
	delete(l.ghosts, lockID{key, token})
}

// remove deletes it from items and the heap; l.mu held.
func (l *Lessor) remove(it *item) {
	l.items.remove(it.id)
	delete(l.marked, it.id)
	if it.id.session() != 0 {
		l.sessions--
	}
	l.unqueue(it)
}

// leaseOf names the lease that times the holder (key, token): its session's
// when it is held under one, else its own; l.mu held.
func (l *Lessor) leaseOf(key string, token uint64) leaseID {
	if s, ok := l.under[lockID{key, token}]; ok {
		return sessionLease(s)
	}
	return lockLease(key, token)
}

// Renewable decides, under the lessor's lock, whether the leader may propose
// a Renew of (key, token) now: this lessor is primary, tracks the lock with
// that token, its deadline has not passed and no Expire of it is decided or
// in flight. A Renew admitted here that commits after an Expire was decided
// still wins: the Expire carries the older seen index (core.ExpireSeen).
// For a holder under a session the answer is its session's (SessionRenewable):
// the server refuses a Renew of such a holder before asking, so this only
// admits an idempotent retry's Regrant.
//
// Errors: ErrExpired, ErrNotHeld, ErrNotPrimary, ErrClosed. ErrNotHeld read
// from a deposed leader's table may be stale: confirm leadership before
// answering with it.
func (l *Lessor) Renewable(key string, token uint64) error {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.renewable(key, token, now)
	return err
}

// Regrant decides, atomically with expiry, whether an idempotent retry of
// Acquire (a Grant that returned the lock its owner already held, token,
// after it applied and restarted the lease through Track) may be answered
// with that lock. If an Expire for (key, token) is still being proposed it
// fails with ErrExpired: the retry goes round again and is answered once that
// Expire has settled (it cannot remove the lock, whose ModIndex moved past
// its seen index, but the leader never hands out a lock under an Expire in
// flight, as it refuses a renewal whose Expire it has already proposed;
// docs/design.md#leases).
//
// Errors: ErrExpired, ErrNotHeld (the lock was removed), ErrNotPrimary, ErrClosed.
func (l *Lessor) Regrant(key string, token uint64) error {
	return l.Renewable(key, token)
}

// renewable returns the item timing (key, token) if it may be renewed at now; l.mu held.
func (l *Lessor) renewable(key string, token uint64, now time.Time) (*item, error) {
	id := l.leaseOf(key, token)
	it, err := l.renewableLease(id, now)
	switch {
	case errors.Is(err, ErrNotHeld) && id.session() != 0:
		return nil, fmt.Errorf("no session %d of the lock on %q with token %d: %w", id.session(), key, token, err)
	case errors.Is(err, ErrNotHeld):
		return nil, fmt.Errorf("no lock on %q with token %d: %w", key, token, err)
	case errors.Is(err, ErrExpired) && id.session() != 0:
		return nil, fmt.Errorf("session %d of the lock on %q with token %d: %w", id.session(), key, token, err)
	case errors.Is(err, ErrExpired):
		return nil, fmt.Errorf("lock on %q with token %d: %w", key, token, err)
	}
	return it, err
}

// renewableLease returns the item of lease id if it may be renewed at now;
// errors are the bare sentinels; l.mu held.
func (l *Lessor) renewableLease(id leaseID, now time.Time) (*item, error) {
	switch it, ok := l.items.get(id); {
	case l.closed:
		return nil, ErrClosed
	case !l.primary:
		return nil, ErrNotPrimary
	case !ok:
		return nil, ErrNotHeld
	case it.expiring || l.mono(now) >= it.deadline || l.proposing[id] > 0:
		return nil, ErrExpired
	default:
		return it, nil
	}
}

// Remaining returns how long the lease of (key, token) has left on this
// node's clock (0 once the deadline passed or it is expiring) and true, or
// false when this node does not track that lock. On a follower it is that
// follower's own measure, never earlier than the leader's by more than the
// replication lag (docs/design.md#reads). A holder under a session has its session's
// remaining time.
func (l *Lessor) Remaining(key string, token uint64) (time.Duration, bool) {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.remaining(l.leaseOf(key, token), now)
}

// remaining is Remaining of lease id; l.mu held.
func (l *Lessor) remaining(id leaseID, now time.Time) (time.Duration, bool) {
	it, ok := l.items.get(id)
	if !ok {
		return 0, false
	}
	if it.expiring || l.mono(now) >= it.deadline {
		return 0, true
	}
	return time.Duration(it.deadline - l.mono(now)), true
}

// Expiring reports whether the lease of (key, token) has ended by this node's
// measure: its deadline passed or an Expire for it was decided (for a holder
// under a session: its session's, SessionExpiring). Such a lock is about to
// be removed and must not be handed out again.
func (l *Lessor) Expiring(key string, token uint64) bool {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expired(l.leaseOf(key, token), now)
}

// expired reports whether lease id is tracked and its deadline passed or its
// expiry was decided; l.mu held.
func (l *Lessor) expired(id leaseID, now time.Time) bool {
	it, ok := l.items.get(id)
	return ok && (it.expiring || l.mono(now) >= it.deadline)
}

// Len returns the number of lock holders this node tracks (every node tracks
// all): those timed on their own and those under a session.
func (l *Lessor) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.items.len() - l.sessions + len(l.under)
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

// lockID names one holder: its key and the token of its grant.
type lockID struct {
	key   string
	token uint64
}

// leaseID names one timed lease: a holder's own (key, token) or a
// session's (key "" and the session's id in token, never a held key's:
// keys are not empty). 24 bytes: it is the key of the lessor's map of
// every lease and is kept in every item.
type leaseID struct {
	key   string
	token uint64
}

func lockLease(key string, token uint64) leaseID { return leaseID{key: key, token: token} }

func sessionLease(id uint64) leaseID { return leaseID{token: id} }

// session is the id of the session whose lease id is (0: a holder's own).
func (id leaseID) session() uint64 {
	if id.key != "" {
		return 0
	}
	return id.token
}

// lockToken is the token of the holder whose lease id is (0: a session's).
func (id leaseID) lockToken() uint64 {
	if id.key == "" {
		return 0
	}
	return id.token
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
