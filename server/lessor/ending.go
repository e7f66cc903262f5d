package lessor

// This file answers "is this holder ending?" in one call (Ending). Besides
// the expiring marks the lessor sets itself (a deadline passed, an Expire or
// ExpireSession decided or in flight), the leader removes holders for two
// reasons the lessor does not decide, and marks them here, under the same
// mutex, for as long as their removal is in flight:
//
//   - a ghost lock: a grant whose client left before it applied, released
//     at once (docs/design.md#ghost-locks). The mark is set before the
//     grant's wait-queue turn ends and cleared when its holder is removed
//     (Removed) or leadership changes (ForgetGhosts);
//   - a session whose CloseSession is in flight (docs/design.md#sessions):
//     every holder under it is about to be removed.
//
// A holder that is ending is no longer valid (CheckToken), is never handed
// out again, not even to its owner, and no grant beside it is proposed while
// it has a lock-delay that its removal would start
// (docs/design.md#lock-delay).

// Ending reports whether the holder (key, token), held under session (0:
// none; the session the lock table records for it), is being removed: its
// lease, or its session's, has ended by this node's measure (Expiring,
// SessionExpiring), its session's CloseSession is in flight
// (MarkClosing), or it is a ghost whose Release is in flight (MarkGhost).
// It takes the lessor's mutex once and calls nothing, so the wait queue may
// ask it with a shard mutex held.
func (l *Lessor) Ending(key string, token, session uint64) bool {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if session != 0 && (l.expired(sessionLease(session), now) || l.closing[session] > 0) {
		return true
	}
	if l.expired(l.leaseOf(key, token), now) {
		return true
	}
	_, ghost := l.ghosts[lockID{key, token}]
	return ghost
}

// MarkGhost records that the holder (key, token) is a ghost whose Release is
// being proposed by this leader. Removed clears the mark when the holder is
// gone; ForgetGhosts clears every mark.
func (l *Lessor) MarkGhost(key string, token uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ghosts[lockID{key, token}] = struct{}{}
}

// Ghost reports whether (key, token) is a ghost whose Release is in flight.
func (l *Lessor) Ghost(key string, token uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.ghosts[lockID{key, token}]
	return ok
}

// ForgetGhosts clears every ghost mark. The server calls it on every
// leadership change: a ghost's Release is proposed by the leader that
// marked it, and stops when that node no longer leads.
func (l *Lessor) ForgetGhosts() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.ghosts)
}

// MarkClosing records that a CloseSession of session id is being proposed.
// Calls nest: the session counts as closing until UnmarkClosing was called
// as often as MarkClosing.
func (l *Lessor) MarkClosing(id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closing[id]++
}

// UnmarkClosing records that one CloseSession of session id has returned
// (applied or failed).
func (l *Lessor) UnmarkClosing(id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing[id]--; l.closing[id] <= 0 {
		delete(l.closing, id)
	}
}

// Closing reports whether a CloseSession of session id is in flight.
func (l *Lessor) Closing(id uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closing[id] > 0
}
