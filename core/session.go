package core

import "math"

// Session is an open session in the lock table (etcd leases, Consul
// sessions): one lease that many locks are held under, renewed for all of
// them by one KeepAliveSession and ended for all of them in one committed
// entry by CloseSession or ExpireSession. Like a lock's, its deadline is not
// replicated state: every node's lessor counts TTLMS from its own apply of
// the entry at ModIndex (docs/design.md#sessions). A Session is a copy: changing it
// changes nothing.
type Session struct {
	// ID is the session's id: the log index of the CreateSession that opened
	// it, so it is unique, never 0, and the same on every node.
	ID uint64
	// TTLMS is the session's lease in milliseconds; every lock held under it
	// has it as its LeaseMS.
	TTLMS int64
	// ModIndex is the log index of the session's CreateSession or last
	// KeepAliveSession. An ExpireSession with a SeenIndex below it does not
	// end the session.
	ModIndex uint64
	// Principal is the identity that opened the session ("" when
	// authorization is off); only a Grant by the same principal may take a
	// lock under it.
	Principal string
}

// SessionEnd is what ending a session removed, in Result.Ended: every holder
// it held (as they were, in ascending key and token order) and the lock-delay
// records made for keys left free by the end (in ascending key order), so
// that an OnApply hook can stop their leases, wake waiters and start the
// delays without a lookup. It is shared, read-only data.
type SessionEnd struct {
	// Locks are the holders removed with the session.
	Locks []Lock
	// Delays are the lock-delay records made (Chubby §2.4, Consul session
	// lock-delay): one per key left without holders by the end whose removed
	// holders asked for a lock-delay, the longest of theirs, with the ending
	// entry's index.
	Delays []LockDelay
}

// CreateSession returns the command that opens a session with a lease of
// ttlMS milliseconds (etcd LeaseGrant, Consul session create). Applied, the
// session's ID is the entry's index and the Result is OutcomeSessionCreated
// with Session and LeaseMS set. It does not validate ttlMS (see
// ValidateLease); WithPrincipal binds the session to an identity.
func CreateSession(ttlMS int64) Command {
	return Command{Op: OpCreateSession, LeaseMS: ttlMS}
}

// KeepAliveSession returns the command that restarts the lease of session id
// (etcd LeaseKeepAlive, Consul session renew): applied, its ModIndex becomes
// the entry's index and the Result is OutcomeRenewed with the session's TTL
// in LeaseMS and its id in Session, so every lock under it is renewed by one
// entry. An unknown id gives OutcomeNotFound.
func KeepAliveSession(id uint64) Command {
	return Command{Op: OpKeepAliveSession, Session: id}
}

// CloseSession returns the command that ends session id and releases every
// lock held under it in the one entry (etcd LeaseRevoke, Consul session
// destroy): OutcomeReleased with Session and Ended set. As with Consul's
// session invalidation, a key the end leaves free gets a LockDelay record, as
// an Expire would leave, with the longest lock-delay its removed holders
// asked for (none if they asked for none). An unknown id gives
// OutcomeNotFound.
func CloseSession(id uint64) Command {
	return Command{Op: OpCloseSession, Session: id}
}

// ExpireSession returns the command that ends session id, if its ModIndex is
// at or below seenIndex (0: unconditionally), releasing every lock held under
// it with lock-delay records as CloseSession does: OutcomeExpired with
// Existed, Session and Ended set. Otherwise (unknown id, or kept alive since
// the leader decided) OutcomeExpired with Existed false and nothing changes.
// Only the leader's lessor proposes it (etcd lessor, Raft-replicated revoke).
func ExpireSession(id, seenIndex uint64) Command {
	return Command{Op: OpExpireSession, Session: id, SeenIndex: seenIndex}
}

// sessionLock is an entry of the state machine's index from sessions to the
// holders under them, ordered by (Session, Key, Token). It is derived state:
// rebuilt from the lock table on Restore, never in a snapshot.
type sessionLock struct {
	session uint64
	key     string
	token   uint64
}

func sessionLess(a, b Session) bool { return a.ID < b.ID }

func sessionLockLess(a, b sessionLock) bool {
	if a.session != b.session {
		return a.session < b.session
	}
	if a.key != b.key {
		return a.key < b.key
	}
	return a.token < b.token
}

// createSession applies a CreateSession at index: the session's id is index.
func (s *StateMachine) createSession(index uint64, cmd Command) Result {
	s.sessions.ReplaceOrInsert(Session{ID: index, TTLMS: cmd.LeaseMS, ModIndex: index, Principal: cmd.Principal})
	s.byPrincipal[cmd.Principal]++
	return Result{Outcome: OutcomeSessionCreated, Session: index, LeaseMS: cmd.LeaseMS}
}

// keepAliveSession applies a KeepAliveSession at index.
func (s *StateMachine) keepAliveSession(index uint64, cmd Command) Result {
	sess, ok := s.sessions.Get(Session{ID: cmd.Session})
	if !ok {
		return Result{Outcome: OutcomeNotFound}
	}
	sess.ModIndex = index
	s.sessions.ReplaceOrInsert(sess)
	return Result{Outcome: OutcomeRenewed, LeaseMS: sess.TTLMS, Session: sess.ID}
}

// endSession removes session cmd.Session, if it exists and (for an Expire,
// seenIndex ≠ 0) is unchanged since seenIndex, with every holder under it,
// recording lock-delays at index. It reports whether the session ended.
func (s *StateMachine) endSession(index, id, seenIndex uint64) (*SessionEnd, bool) {
	sess, ok := s.sessions.Get(Session{ID: id})
	if !ok || (seenIndex != 0 && sess.ModIndex > seenIndex) {
		return nil, false
	}
	s.sessions.Delete(sess)
	if s.byPrincipal[sess.Principal]--; s.byPrincipal[sess.Principal] <= 0 {
		delete(s.byPrincipal, sess.Principal)
	}
	var refs []sessionLock
	s.sessLocks.AscendGreaterOrEqual(sessionLock{session: id}, func(r sessionLock) bool {
		if r.session != id {
			return false
		}
		refs = append(refs, r)
		return true
	})
	end := &SessionEnd{Locks: make([]Lock, 0, len(refs))}
	// refs come in key order: the holders of one key are removed together,
	// and a key they leave free is delayed by the longest lock-delay among
	// them.
	var delayMS int64
	for i, r := range refs {
		h, ok := s.locks.Delete(holderID(r.key, r.token))
		if !ok { // the index and the table always agree; be safe anyway
			continue
		}
		held := h.lock()
		left, _, _ := s.removed(index, held, false)
		end.Locks = append(end.Locks, held)
		delayMS = max(delayMS, held.LockDelayMS)
		if i+1 < len(refs) && refs[i+1].key == r.key {
			continue
		}
		if left == 0 && delayMS > 0 {
			d := LockDelay{Key: r.key, LockDelayMS: delayMS, Index: index}
			s.delays.ReplaceOrInsert(d)
			end.Delays = append(end.Delays, d)
		}
		delayMS = 0
	}
	return end, true
}

// closeSession applies a CloseSession at index.
func (s *StateMachine) closeSession(index uint64, cmd Command) Result {
	end, ok := s.endSession(index, cmd.Session, 0)
	if !ok {
		return Result{Outcome: OutcomeNotFound}
	}
	return Result{Outcome: OutcomeReleased, Session: cmd.Session, Ended: end}
}

// expireSession applies an ExpireSession at index.
func (s *StateMachine) expireSession(index uint64, cmd Command) Result {
	end, ok := s.endSession(index, cmd.Session, cmd.SeenIndex)
	if !ok {
		return Result{Outcome: OutcomeExpired}
	}
	return Result{Outcome: OutcomeExpired, Existed: true, Session: cmd.Session, Ended: end}
}

// Session returns the open session id, if any. Safe concurrently with Apply.
func (s *StateMachine) Session(id uint64) (Session, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.sessions.Get(Session{ID: id})
}

// SessionLen returns the number of open sessions.
func (s *StateMachine) SessionLen() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.sessions.Len()
}

// PrincipalSessions returns the number of open sessions opened by
// principal ("" counts those opened with authorization off): the per-principal
// cap (limits.max_sessions_per_principal) is checked against it. It is
// derived state, kept on every create and end and rebuilt by Restore, so it
// is the same on every node at the same applied index. Safe concurrently
// with Apply.
func (s *StateMachine) PrincipalSessions(principal string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byPrincipal[principal]
}

// AscendSessions calls fn for every open session in ascending id order until
// fn returns false: for a node's lessor that has restored a snapshot and must
// start timing the sessions it holds. It holds a read lock on the table: fn
// must not call Apply or Restore.
func (s *StateMachine) AscendSessions(fn func(Session) bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.sessions.Ascend(fn)
}

// SessionRange returns up to limit open sessions whose id is above after, in
// ascending id order (limit ≤ 0: no limit): a page of the sessions for a
// reader that must not hold the table's read lock across them all. Safe
// concurrently with Apply; the slice is the caller's.
func (s *StateMachine) SessionRange(after uint64, limit int) []Session {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Session
	if after == math.MaxUint64 {
		return nil // no id is above it (and after+1 would wrap to the first)
	}
	s.sessions.AscendGreaterOrEqual(Session{ID: after + 1}, func(ss Session) bool {
		if limit > 0 && len(out) >= limit {
			return false
		}
		out = append(out, ss)
		return true
	})
	return out
}

// SessionLockLen returns the number of holders under session id (0 for an
// unknown or ended id): what the server counts against
// limits.max_locks_per_session before it proposes a Grant under id. It walks
// the session index, so it costs time linear in that number. Safe
// concurrently with Apply.
func (s *StateMachine) SessionLockLen(id uint64) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	s.sessLocks.AscendGreaterOrEqual(sessionLock{session: id}, func(r sessionLock) bool {
		if r.session != id {
			return false
		}
		n++
		return true
	})
	return n
}

// SessionLocks returns the holders under session id, in ascending key and
// token order (none for an unknown id). Safe concurrently with Apply; the
// slice is the caller's.
func (s *StateMachine) SessionLocks(id uint64) []Lock {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Lock
	s.sessLocks.AscendGreaterOrEqual(sessionLock{session: id}, func(r sessionLock) bool {
		if r.session != id {
			return false
		}
		if h, ok := s.locks.Get(holderID(r.key, r.token)); ok {
			out = append(out, h.lock())
		}
		return true
	})
	return out
}
