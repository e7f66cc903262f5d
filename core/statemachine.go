package core

import (
	"fmt"
	"strings"
	"sync"

	"github.com/google/btree"
)

// StateMachine is the deterministic lock table every node applies committed log
// entries to: held locks by key, the keys held back by lock-delay, the last
// fencing token granted, the member directory, and the last applied log index.
//
// Apply and Restore must be called from one goroutine (the backend's apply
// loop), like hashicorp raft.FSM. Reads (Get, Range, Ascend, LockDelay,
// AscendLockDelays, Len, LastToken, AppliedIndex, Snapshot, ...) are safe
// concurrently with Apply.
//
// Apply is deterministic: it reads no clock and no randomness, and its output
// never depends on map order, so every node that applies the same log reaches
// the same state and writes byte-identical snapshots. Lease and lock-delay
// deadlines are not state here; only each lock's lease length and last-change
// index (Lock.ModIndex) and each delay's length and Expire index are: every
// node times them on its own clock from its own apply (DESIGN.md, Leases).
type StateMachine struct {
	mu        sync.RWMutex
	locks     *btree.BTreeG[Lock]      // ordered by Key: sorted snapshots and prefix listing
	delays    *btree.BTreeG[LockDelay] // ordered by Key; a key is never both held and delayed
	members   map[string]string        // member id -> client API address
	lastToken uint64
	applied   uint64
}

// btreeDegree is the B-tree fan-out; 32 keeps nodes within a few cache lines of
// pointers while keeping the tree shallow at a million keys.
const btreeDegree = 32

func lockLess(a, b Lock) bool { return a.Key < b.Key }

func delayLess(a, b LockDelay) bool { return a.Key < b.Key }

// NewStateMachine returns an empty state machine: no locks, LastToken 0,
// AppliedIndex 0.
func NewStateMachine() *StateMachine {
	return &StateMachine{
		locks:   btree.NewG(btreeDegree, lockLess),
		delays:  btree.NewG(btreeDegree, delayLess),
		members: map[string]string{},
	}
}

// Apply applies cmd, the entry at log index, and returns its Result, following
// DESIGN.md's command table. Indexes must grow but may skip values (entries
// without a command, see Skip).
//
// An index at or below AppliedIndex is not applied again: the Result is
// OutcomeNoop and nothing changes, so replaying the log after a restart is
// idempotent. The only error, wrapping ErrDecode, is for an unknown Op; it
// means the node must stop, since skipping the entry would fork the state
// (DESIGN.md, Rules for Apply), and AppliedIndex does not move.
//
// Apply does not validate cmd: it must be a Command that Encode accepts (as
// every decoded entry is). It runs in O(log n) for n held locks and does not
// allocate on a grant or release cycle (see BenchmarkApply). Call it from one
// goroutine only.
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
		res = Result{Outcome: OutcomeNotFound}
		if _, ok := s.removeIfHeld(cmd.Key, cmd.Token, 0); ok {
			res = Result{Outcome: OutcomeReleased}
		}
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

// grant applies a Grant at index (see Grant for the rules). It inserts
// optimistically, so the common case (a free key) walks the B-tree once
// instead of a Get followed by an insert; when the key turns out to be held,
// the holder is put back (with ModIndex moved for a retry).
func (s *StateMachine) grant(index uint64, cmd Command) Result {
	lock := Lock{
		Key: cmd.Key, Token: s.lastToken + 1, LeaseMS: cmd.LeaseMS, Owner: cmd.Owner,
		ModIndex: index, LockDelayMS: cmd.LockDelayMS, Principal: cmd.Principal,
	}
	if held, replaced := s.locks.ReplaceOrInsert(lock); replaced {
		if held.Owner == cmd.Owner && held.Principal == cmd.Principal {
			// A retried request: idempotent, the same lock, whose lease
			// restarts from this entry as with a Renew.
			held.ModIndex = index
			s.locks.ReplaceOrInsert(held)
			return Result{Outcome: OutcomeGranted, Token: held.Token, LeaseMS: held.LeaseMS}
		}
		s.locks.ReplaceOrInsert(held)
		return Result{Outcome: OutcomeGrantRejected, Token: held.Token}
	}
	s.lastToken = lock.Token
	if s.delays.Len() > 0 {
		s.delays.Delete(LockDelay{Key: cmd.Key})
	}
	return Result{Outcome: OutcomeGranted, Token: lock.Token, LeaseMS: lock.LeaseMS, Created: true}
}

// renew applies a Renew at index: the lock held with cmd.Token gets ModIndex
// index; anything else is NotFound.
func (s *StateMachine) renew(index uint64, cmd Command) Result {
	held, ok := s.locks.Get(Lock{Key: cmd.Key})
	if !ok || held.Token != cmd.Token {
		return Result{Outcome: OutcomeNotFound}
	}
	held.ModIndex = index
	s.locks.ReplaceOrInsert(held)
	return Result{Outcome: OutcomeRenewed, LeaseMS: held.LeaseMS}
}

// expire applies an Expire at index: it removes the lock held with cmd.Token
// unless it changed after cmd.SeenIndex (0: unconditional), and records a
// lock-delay for the key if the lock asked for one.
func (s *StateMachine) expire(index uint64, cmd Command) Result {
	held, ok := s.removeIfHeld(cmd.Key, cmd.Token, cmd.SeenIndex)
	if !ok {
		return Result{Outcome: OutcomeExpired}
	}
	if held.LockDelayMS > 0 {
		s.delays.ReplaceOrInsert(LockDelay{Key: held.Key, LockDelayMS: held.LockDelayMS, Index: index})
	}
	return Result{Outcome: OutcomeExpired, Existed: true, LockDelayMS: held.LockDelayMS}
}

// removeIfHeld deletes key when it is held with token and, if seenIndex is
// not 0, its ModIndex is at or below seenIndex; it returns the removed lock.
// A late or duplicated Release/Expire never removes a lock granted since, and
// an Expire never one renewed since. Like grant it is optimistic: one tree
// walk when the lock is removed (the common case), and a lock that stays is
// put back unchanged.
func (s *StateMachine) removeIfHeld(key string, token, seenIndex uint64) (Lock, bool) {
	held, ok := s.locks.Delete(Lock{Key: key})
	if !ok {
		return Lock{}, false
	}
	if held.Token != token || (seenIndex != 0 && held.ModIndex > seenIndex) {
		s.locks.ReplaceOrInsert(held)
		return Lock{}, false
	}
	return held, true
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

// Len returns the number of held locks.
func (s *StateMachine) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.locks.Len()
}

// Get returns the lock held on key, if any. Safe concurrently with Apply.
func (s *StateMachine) Get(key string) (Lock, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.locks.Get(Lock{Key: key})
}

// Range returns up to limit held locks whose key starts with prefix and sorts
// after `after` (exclusive; "" starts at the first), in ascending key order.
// limit ≤ 0 means no limit. Safe concurrently with Apply; the slice is the
// caller's.
func (s *StateMachine) Range(prefix, after string, limit int) []Lock {
	s.mu.RLock()
	defer s.mu.RUnlock()
	start := prefix
	if after >= start {
		start = after + "\x00" // the smallest key greater than after
	}
	var out []Lock
	s.locks.AscendGreaterOrEqual(Lock{Key: start}, func(l Lock) bool {
		if !strings.HasPrefix(l.Key, prefix) || (limit > 0 && len(out) >= limit) {
			return false
		}
		out = append(out, l)
		return true
	})
	return out
}

// Ascend calls fn for every held lock in ascending key order until fn returns
// false. It holds a read lock on the table: fn must not call Apply or Restore.
func (s *StateMachine) Ascend(fn func(Lock) bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.locks.Ascend(fn)
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
