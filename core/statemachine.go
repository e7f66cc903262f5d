package core

import (
	"fmt"
	"maps"
	"strings"
	"sync"

	"github.com/google/btree"
)

// StateMachine is the deterministic lock table every node applies committed log
// entries to: the holders of every held key (one for an exclusive lock,
// several for a shared key or a semaphore, each with its own fencing token),
// the open sessions, the keys held back by lock-delay, the last fencing token
// granted, the member directory, and the last applied log index.
//
// Apply and Restore must be called from one goroutine (the backend's apply
// loop), like hashicorp raft.FSM. Reads (Get, Holders, Holder, Range, Ascend,
// Session, LockDelay, AscendLockDelays, Len, LastToken, AppliedIndex,
// Snapshot, ...) are safe concurrently with Apply.
//
// Apply is deterministic: it reads no clock and no randomness, and its output
// never depends on map order, so every node that applies the same log reaches
// the same state and writes byte-identical snapshots. Lease and lock-delay
// deadlines are not state here; only each holder's (and session's) lease
// length and last-change index (Lock.ModIndex, Session.ModIndex) and each
// delay's length and Expire index are: every node times them on its own clock
// from its own apply (docs/design.md#leases).
type StateMachine struct {
	mu        sync.RWMutex
	locks     *btree.BTreeG[holder]      // every holder (compact: holder.go), ordered by (Key, Token): sorted snapshots and prefix listing
	delays    *btree.BTreeG[LockDelay]   // ordered by Key; a key is never both held and delayed
	sessions  *btree.BTreeG[Session]     // ordered by ID
	sessLocks *btree.BTreeG[sessionLock] // derived: holders by session, ordered by (Session, Key, Token)
	// byPrincipal is derived: open sessions per principal ("" when
	// authorization is off), maintained on a session's create and end,
	// rebuilt on Restore, never in a snapshot. Only counted, never ranged
	// over, so map order reaches no output.
	byPrincipal map[string]int
	// holdersBy is derived: holders per principal ("" when authorization
	// is off), kept on every grant and removal, rebuilt on Restore, never in
	// a snapshot; counted only, as byPrincipal. The leader checks a
	// principal's lock quota against it (docs/security.md#quotas).
	holdersBy map[string]int
	members   map[string]string // member id -> client API address
	keys      int               // keys with at least one holder
	extended  int               // holders that need snapshot version 3 (see needsV3)
	lastToken uint64
	applied   uint64
	// restores counts the Restores that replaced the table: node-local, never
	// in a snapshot. A reader that keeps state derived from the table (the
	// server's lessor) compares it with the count it last rebuilt at, so a
	// table replaced behind its back is noticed without treating a gap in
	// the applied indexes (a leader's no-op, an empty entry, a configuration
	// change) as one (docs/design.md#replicated-commands).
	restores uint64

	// Apply-goroutine scratch for holdersOf, so that a grant does not allocate.
	scanKey string
	scan    []Lock
	collect func(holder) bool
}

// btreeDegree is the B-tree fan-out; 32 keeps nodes within a few cache lines of
// pointers while keeping the tree shallow at a million keys.
const btreeDegree = 32

func delayLess(a, b LockDelay) bool { return a.Key < b.Key }

// needsV3 reports whether holder l uses anything a version 2 snapshot cannot
// hold: a mode, a limit or a session.
func needsV3(l Lock) bool { return l.Mode != ModeExclusive || l.Limit != 0 || l.Session != 0 }

// plain reports whether l is the holder of a plain exclusive lock (the only
// kind before modes, limits and sessions), which is always its key's only holder.
func plain(l Lock) bool { return l.Mode == ModeExclusive && l.Limit == 0 }

// NewStateMachine returns an empty state machine: no locks, no sessions,
// LastToken 0, AppliedIndex 0.
func NewStateMachine() *StateMachine {
	s := &StateMachine{
		locks:       newLockTree(),
		delays:      btree.NewG(btreeDegree, delayLess),
		sessions:    btree.NewG(btreeDegree, sessionLess),
		sessLocks:   btree.NewG(btreeDegree, sessionLockLess),
		byPrincipal: map[string]int{},
		holdersBy:   map[string]int{},
		members:     map[string]string{},
	}
	s.collect = s.collectHolder
	return s
}

// Apply applies cmd, the entry at log index, and returns its Result, following
// the command table of docs/design.md#replicated-commands (see each command's constructor for its rules).
// Indexes must grow but may skip values (entries without a command, see Skip).
//
// An index at or below AppliedIndex is not applied again: the Result is
// OutcomeNoop and nothing changes, so replaying the log after a restart is
// idempotent. The only error, wrapping ErrDecode, is for an unknown Op; it
// means the node must stop, since skipping the entry would fork the state
// (docs/design.md#replicated-commands), and AppliedIndex does not move.
//
// Apply does not validate cmd: it must be a Command that Encode accepts (as
// every decoded entry is). It runs in O(log n + h) for n holders and h
// holders of the key (of the session, for a session's end), and does not
// allocate on a grant or release cycle of an exclusive or shared lock (see
// BenchmarkApply) held without a principal, lock-delay, limit or session
// (a holder with any of these keeps them in a small record of its own:
// holder.go). Call it from one goroutine only.
func (s *StateMachine) Apply(index uint64, cmd Command) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index <= s.applied {
		return Result{Outcome: OutcomeNoop}, nil
	}
	var res Result
	switch cmd.Op {
	case OpNoop:
		res = Result{Outcome: OutcomeNoop}
	case OpGrant:
		res = s.grant(index, cmd)
	case OpRelease:
		res = s.release(index, cmd)
	case OpRenew:
		res = s.renew(index, cmd)
	case OpExpire:
		res = s.expire(index, cmd)
	case OpSetMember:
		if cmd.APIAddr == "" {
			delete(s.members, cmd.MemberID)
		} else {
			s.members[cmd.MemberID] = cmd.APIAddr
		}
		res = Result{Outcome: OutcomeNoop}
	case OpCreateSession:
		res = s.createSession(index, cmd)
	case OpKeepAliveSession:
		res = s.keepAliveSession(index, cmd)
	case OpCloseSession:
		res = s.closeSession(index, cmd)
	case OpExpireSession:
		res = s.expireSession(index, cmd)
	case OpRenewBatch:
		if cmd.Batch == nil {
			return Result{}, fmt.Errorf("%w: apply index %d: renew batch without renewals", ErrDecode, index)
		}
		res = s.renewBatch(index, cmd)
	default:
		return Result{}, fmt.Errorf("%w: apply index %d: unknown op %v", ErrDecode, index, cmd.Op)
	}
	s.applied = index
	return res, nil
}

// ApplyEntry decodes data (the Encode form) and applies it at index. It returns
// the decoded Command with the Result so callers can observe both. Errors wrap
// ErrDecode and are fatal for the node: an undecodable entry is never skipped,
// and AppliedIndex does not move. Call it from the apply goroutine, like Apply.
func (s *StateMachine) ApplyEntry(index uint64, data []byte) (Command, Result, error) {
	cmd, err := Decode(data)
	if err != nil {
		return Command{}, Result{}, fmt.Errorf("apply index %d: %w", index, err)
	}
	res, err := s.Apply(index, cmd)
	return cmd, res, err
}

// Skip records index as applied without a command: for log entries that carry
// no ticketd command (a Raft configuration change, an empty leader entry).
// An index at or below AppliedIndex is ignored. Call it from the apply
// goroutine, like Apply.
func (s *StateMachine) Skip(index uint64) {
	s.mu.Lock()
	if index > s.applied {
		s.applied = index
	}
	s.mu.Unlock()
}

// holdersOf returns the holders of key in token order, in a scratch slice
// that the next call reuses (apply goroutine only, under the write lock).
func (s *StateMachine) holdersOf(key string) []Lock {
	s.scanKey, s.scan = key, s.scan[:0]
	s.locks.AscendGreaterOrEqual(holderKey(key), s.collect)
	return s.scan
}

func (s *StateMachine) collectHolder(h holder) bool {
	if h.key != s.scanKey {
		return false
	}
	s.scan = append(s.scan, h.lock())
	return true
}

// keyResult adds the key's mode, limit and holder count to r, for a key that
// is not a plain exclusive lock (whose Results stay what they always were).
func keyResult(r Result, l Lock, holders int) Result {
	if !plain(l) {
		r.Mode, r.Limit, r.Holders = l.Mode, l.Limit, holders
	}
	return r
}

// grant applies a Grant at index (see Grant for the rules).
func (s *StateMachine) grant(index uint64, cmd Command) Result {
	leaseMS := cmd.LeaseMS
	if cmd.Session != 0 {
		sess, ok := s.sessions.Get(Session{ID: cmd.Session})
		if !ok || sess.Principal != cmd.Principal {
			return Result{Outcome: OutcomeSessionNotFound}
		}
		leaseMS = sess.TTLMS
	}
	mode := cmd.Mode
	if cmd.Limit > 0 {
		mode = ModeExclusive // a semaphore counts holders; it has no modes
	}
	holders := s.holdersOf(cmd.Key)
	if len(holders) > 0 {
		for _, h := range holders {
			if h.Owner == cmd.Owner && h.Principal == cmd.Principal {
				// A retried request: idempotent, the same holder, whose
				// lease restarts from this entry as with a Renew.
				h.ModIndex = index
				s.touch(h.Key, h.Token, index)
				return keyResult(Result{Outcome: OutcomeGranted, Token: h.Token, LeaseMS: h.LeaseMS, Session: h.Session}, h, len(holders))
			}
		}
		first := holders[0]
		if first.Limit != cmd.Limit {
			return Result{Outcome: OutcomeLimitMismatch, Token: first.Token, Mode: first.Mode, Limit: first.Limit, Holders: len(holders)}
		}
		var full bool
		switch {
		case first.Limit > 0:
			full = len(holders) >= int(first.Limit)
		default: // only shared holders share
			full = first.Mode != ModeShared || mode != ModeShared
		}
		if full {
			return keyResult(Result{Outcome: OutcomeGrantRejected, Token: first.Token}, first, len(holders))
		}
	}
	lock := Lock{
		Key: cmd.Key, Token: s.lastToken + 1, LeaseMS: leaseMS, Owner: cmd.Owner,
		ModIndex: index, LockDelayMS: cmd.LockDelayMS, Principal: cmd.Principal,
		Mode: mode, Limit: cmd.Limit, Session: cmd.Session,
	}
	s.locks.ReplaceOrInsert(holderOf(lock))
	s.lastToken = lock.Token
	s.holdersBy[lock.Principal]++
	if len(holders) == 0 {
		s.keys++
		if s.delays.Len() > 0 {
			s.delays.Delete(LockDelay{Key: cmd.Key})
		}
	}
	if needsV3(lock) {
		s.extended++
	}
	if lock.Session != 0 {
		s.sessLocks.ReplaceOrInsert(sessionLock{session: lock.Session, key: lock.Key, token: lock.Token})
	}
	return keyResult(Result{Outcome: OutcomeGranted, Token: lock.Token, LeaseMS: lock.LeaseMS, Created: true, Session: lock.Session}, lock, len(holders)+1)
}

// removed does the bookkeeping after holder held was deleted from the lock
// table at index: the session index, the key count and, for an ending by
// Expire or a session's end (expired), a lock-delay record if the key is now
// free and held asked for one. It returns the holders left on the key and the
// record made, if any.
func (s *StateMachine) removed(index uint64, held Lock, expired bool) (int, LockDelay, bool) {
	if held.Session != 0 {
		s.sessLocks.Delete(sessionLock{session: held.Session, key: held.Key, token: held.Token})
	}
	if s.holdersBy[held.Principal]--; s.holdersBy[held.Principal] <= 0 {
		delete(s.holdersBy, held.Principal)
	}
	if needsV3(held) {
		s.extended--
	}
	left := 0
	if !plain(held) {
		left = len(s.holdersOf(held.Key))
	}
	if left > 0 {
		return left, LockDelay{}, false
	}
	s.keys--
	if !expired || held.LockDelayMS <= 0 {
		return 0, LockDelay{}, false
	}
	d := LockDelay{Key: held.Key, LockDelayMS: held.LockDelayMS, Index: index}
	s.delays.ReplaceOrInsert(d)
	return 0, d, true
}

// release applies a Release at index: the holder of cmd.Key with cmd.Token
// is removed; anything else is NotFound.
func (s *StateMachine) release(index uint64, cmd Command) Result {
	h, ok := s.locks.Delete(holderID(cmd.Key, cmd.Token))
	if !ok {
		return Result{Outcome: OutcomeNotFound}
	}
	held := h.lock()
	left, _, _ := s.removed(index, held, false)
	return keyResult(Result{Outcome: OutcomeReleased}, held, left)
}

// renew applies a Renew at index: the holder of cmd.Key with cmd.Token gets
// ModIndex index; anything else is NotFound.
func (s *StateMachine) renew(index uint64, cmd Command) Result {
	h, ok := s.touch(cmd.Key, cmd.Token, index)
	if !ok {
		return Result{Outcome: OutcomeNotFound}
	}
	return Result{Outcome: OutcomeRenewed, LeaseMS: h.leaseMS}
}

// touch sets the ModIndex of key's holder with token to index, in place of
// the stored holder (its ext shared, not copied), and returns it.
func (s *StateMachine) touch(key string, token, index uint64) (holder, bool) {
	h, ok := s.locks.Get(holderID(key, token))
	if !ok {
		return holder{}, false
	}
	h.modIndex = index
	s.locks.ReplaceOrInsert(h)
	return h, true
}

// expire applies an Expire at index: it removes the holder of cmd.Key with
// cmd.Token unless it changed after cmd.SeenIndex (0: unconditional), and
// records a lock-delay for the key if the holder asked for one and the key is
// left free. A late or duplicated Expire never removes a holder granted
// since, nor one renewed since. Like the Release, it is optimistic: one tree
// walk when the holder is removed (the common case), and a holder that stays
// is put back unchanged.
func (s *StateMachine) expire(index uint64, cmd Command) Result {
	h, ok := s.locks.Delete(holderID(cmd.Key, cmd.Token))
	if !ok {
		return Result{Outcome: OutcomeExpired}
	}
	if cmd.SeenIndex != 0 && h.modIndex > cmd.SeenIndex {
		s.locks.ReplaceOrInsert(h)
		return Result{Outcome: OutcomeExpired}
	}
	held := h.lock()
	left, d, _ := s.removed(index, held, true)
	return keyResult(Result{Outcome: OutcomeExpired, Existed: true, LockDelayMS: d.LockDelayMS}, held, left)
}

// Restores returns how many times Restore has replaced the table of s (0
// for a state machine that was only ever applied to). It changes only in
// Restore, never in Apply or Skip. Safe concurrently with Apply.
func (s *StateMachine) Restores() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.restores
}

// AppliedIndex returns the log index of the last applied entry (0 if none).
func (s *StateMachine) AppliedIndex() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.applied
}

// LastToken returns the last fencing token granted (0 if none). The next grant
// gets LastToken()+1.
func (s *StateMachine) LastToken() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.lastToken
}

// Len returns the number of held keys (a shared key or a semaphore with
// several holders counts once; see HolderLen).
func (s *StateMachine) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.keys
}

// HolderLen returns the number of holders of all keys: Len plus the extra
// holders of shared keys and semaphores.
func (s *StateMachine) HolderLen() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.locks.Len()
}

// PrincipalLocks returns the number of holders whose Grant was bound to
// principal ("" counts those granted with authorization off), over every
// key: a shared key or a semaphore counts each of the principal's holders.
// The leader checks a principal's lock quota against it before it proposes
// a Grant. It is derived state, kept on every grant and removal (Release,
// Expire, a session's end) and rebuilt by Restore, so it is the same on
// every node at the same applied index; it is never in a snapshot. Safe
// concurrently with Apply.
func (s *StateMachine) PrincipalLocks(principal string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.holdersBy[principal]
}

// PrincipalCounts returns a copy of the per-principal counts of holders
// (PrincipalLocks) and open sessions (PrincipalSessions), principals with
// none left out: for metrics read on scrape. Safe concurrently with Apply.
func (s *StateMachine) PrincipalCounts() (locks, sessions map[string]int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.holdersBy), maps.Clone(s.byPrincipal)
}

// Get returns the holder of key, if it is held: for a shared key or a
// semaphore, the oldest holder (lowest token; see Holders for all). Safe
// concurrently with Apply.
func (s *StateMachine) Get(key string) (Lock, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out Lock
	var ok bool
	s.locks.AscendGreaterOrEqual(holderKey(key), func(h holder) bool {
		out, ok = h.lock(), h.key == key
		return false
	})
	if !ok {
		return Lock{}, false
	}
	return out, true
}

// Holders returns every holder of key in ascending token order (nil when key
// is free). Safe concurrently with Apply; the slice is the caller's.
func (s *StateMachine) Holders(key string) []Lock {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Lock
	s.locks.AscendGreaterOrEqual(holderKey(key), func(h holder) bool {
		if h.key != key {
			return false
		}
		out = append(out, h.lock())
		return true
	})
	return out
}

// Holder returns the holder of key with token, if it still holds: the
// fencing check (CheckToken) for any mode. Safe concurrently with Apply.
func (s *StateMachine) Holder(key string, token uint64) (Lock, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.locks.Get(holderID(key, token))
	return h.lock(), ok
}

// Range returns the holders of up to limit held keys whose key starts with
// prefix and sorts after `after` (exclusive; "" starts at the first), in
// ascending key and token order: all holders of a key come together, and
// limit counts keys, so paging by the last key never splits one. limit ≤ 0
// means no limit. Safe concurrently with Apply; the slice is the caller's.
func (s *StateMachine) Range(prefix, after string, limit int) []Lock {
	s.mu.RLock()
	defer s.mu.RUnlock()
	start := prefix
	if after >= start {
		start = after + "\x00" // the smallest key greater than after
	}
	var out []Lock
	keys := 0
	s.locks.AscendGreaterOrEqual(holderKey(start), func(h holder) bool {
		if !strings.HasPrefix(h.key, prefix) {
			return false
		}
		if len(out) == 0 || out[len(out)-1].Key != h.key {
			if limit > 0 && keys >= limit {
				return false
			}
			keys++
		}
		out = append(out, h.lock())
		return true
	})
	return out
}

// Ascend calls fn for every holder in ascending key and token order until fn
// returns false. It holds a read lock on the table: fn must not call Apply or
// Restore.
func (s *StateMachine) Ascend(fn func(Lock) bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.locks.Ascend(func(h holder) bool { return fn(h.lock()) })
}

// LockDelay returns the lock-delay record of key, if an Expire removed a lock
// on key that asked for a lock-delay and key has not been granted since. The
// leader must not propose a Grant for key until rec.LockDelayMS milliseconds
// have passed on its own monotonic clock since its local apply of the Expire
// at rec.Index (Result.LockDelayMS tells an OnApply hook the same at apply
// time); after a restart or Restore, from when it learned of the record.
// Safe concurrently with Apply.
func (s *StateMachine) LockDelay(key string) (LockDelay, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.delays.Get(LockDelay{Key: key})
}

// AscendLockDelays calls fn for every lock-delay record in ascending key order
// until fn returns false: for a node that has restored a snapshot and must
// start counting the delays it holds. It holds a read lock on the table: fn
// must not call Apply or Restore.
func (s *StateMachine) AscendLockDelays(fn func(LockDelay) bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.delays.Ascend(fn)
}

// MemberAPIAddr returns the client API address recorded for member id (SetMember).
func (s *StateMachine) MemberAPIAddr(id string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	addr, ok := s.members[id]
	return addr, ok
}

// Members returns a copy of the member directory: member id -> client API address.
func (s *StateMachine) Members() map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]string, len(s.members))
	for id, addr := range s.members {
		out[id] = addr
	}
	return out
}
