package core

import (
	"fmt"
	"strings"
	"sync"

	"github.com/google/btree"
)

// StateMachine is the deterministic lock table every node applies committed log
// entries to: held locks by key, the last fencing token granted, the member
// directory, and the last applied log index.
//
// Apply and Restore must be called from one goroutine (the backend's apply
// loop), like hashicorp raft.FSM. Reads (Get, Range, Ascend, Len, LastToken,
// AppliedIndex, Snapshot, ...) are safe concurrently with Apply.
//
// Apply is deterministic: it reads no clock and no randomness, and its output
// never depends on map order, so every node that applies the same log reaches
// the same state and writes byte-identical snapshots. Lease deadlines are not
// state here; only each lock's lease length is (DESIGN.md, Leases).
type StateMachine struct {
	mu        sync.RWMutex
	locks     *btree.BTreeG[Lock] // ordered by Key: sorted snapshots and prefix listing
	members   map[string]string   // member id -> client API address
	lastToken uint64
	applied   uint64
}

// btreeDegree is the B-tree fan-out; 32 keeps nodes within a few cache lines of
// pointers while keeping the tree shallow at a million keys.
const btreeDegree = 32

func lockLess(a, b Lock) bool { return a.Key < b.Key }

// NewStateMachine returns an empty state machine: no locks, LastToken 0,
// AppliedIndex 0.
func NewStateMachine() *StateMachine {
	return &StateMachine{
		locks:   btree.NewG(btreeDegree, lockLess),
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
		res = s.grant(cmd)
	case OpRelease:
		res = Result{Outcome: OutcomeNotFound}
		if s.removeIfHeld(cmd.Key, cmd.Token) {
			res = Result{Outcome: OutcomeReleased}
		}
	case OpExpire:
		res = Result{Outcome: OutcomeExpired, Existed: s.removeIfHeld(cmd.Key, cmd.Token)}
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

// grant applies a Grant. It inserts optimistically, so the common case (a free
// key) walks the B-tree once instead of a Get followed by an insert; when the
// key turns out to be held, the holder is put back unchanged.
func (s *StateMachine) grant(cmd Command) Result {
	lock := Lock{Key: cmd.Key, Token: s.lastToken + 1, LeaseMS: cmd.LeaseMS, Owner: cmd.Owner}
	if held, replaced := s.locks.ReplaceOrInsert(lock); replaced {
		s.locks.ReplaceOrInsert(held)
		if held.Owner == cmd.Owner {
			// A retried request: idempotent, the same lock unchanged.
			return Result{Outcome: OutcomeGranted, Token: held.Token, LeaseMS: held.LeaseMS}
		}
		return Result{Outcome: OutcomeGrantRejected, Token: held.Token}
	}
	s.lastToken = lock.Token
	return Result{Outcome: OutcomeGranted, Token: lock.Token, LeaseMS: lock.LeaseMS, Created: true}
}

// removeIfHeld deletes key when it is held with token; a late or duplicated
// Release/Expire never removes a lock granted since. Like grant it is
// optimistic: one tree walk when the token matches (the common case), and a
// lock held with another token is put back unchanged.
func (s *StateMachine) removeIfHeld(key string, token uint64) bool {
	held, ok := s.locks.Delete(Lock{Key: key})
	if !ok {
		return false
	}
	if held.Token != token {
		s.locks.ReplaceOrInsert(held)
		return false
	}
	return true
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
