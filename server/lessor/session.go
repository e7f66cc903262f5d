package lessor

import (
	"fmt"
	"time"
)

// This file times sessions (docs/design.md#sessions; etcd leases, Consul sessions): one
// lease that many holders are under, timed like a lock's on every node from
// its own apply, expired on the leader by one core.ExpireSession proposal.

// TrackSession records that session id with a TTL of ttlMS milliseconds had
// its CreateSession or a KeepAliveSession applied locally at log index index:
// its deadline becomes now + ttlMS on this node's monotonic clock (or, for an
// entry an earlier run of this node applied, that run's apply + ttlMS:
// Config.AppliedAt) and index
// its seen index, which the ExpireSession carries (a KeepAlive that commits
// between the decision and the ExpireSession's apply wins). A session marked
// expiring becomes unmarked. Call it on every node. Does not block.
func (l *Lessor) TrackSession(id uint64, ttlMS int64, index uint64) {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.track(sessionLease(id), ttlMS, index, l.start(index, now).Add(ms(ttlMS)))
}

// TrackUnder records that the holder (key, token) was granted under session
// (a Grant with core.Result.Session set applied, created or an idempotent
// retry). Such a holder has no lease of its own: Track skips it, and
// Renewable, Regrant, Remaining and Expiring answer by the session's lease.
// The key's lock-delay, if any, ends (a grant clears it in core). Call it on
// every node. Does not block.
func (l *Lessor) TrackUnder(key string, token, session uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clearDelay(key)
	if it, ok := l.items.get(lockLease(key, token)); ok {
		l.remove(it)
	}
	l.attach(lockID{key, token}, session)
}

// SessionEnded records that session id ended (a CloseSession applied, or an
// ExpireSession that ended it: Result.Ended set): its lease and every holder
// under it are forgotten. An ExpireSession that did not end the session
// (kept alive since its decision) must not be reported. Does not block.
func (l *Lessor) SessionEnded(id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if it, ok := l.items.get(sessionLease(id)); ok {
		l.remove(it)
	}
	for h := range l.members[id] {
		l.detach(h)
	}
}

// SessionRenewable decides, under the lessor's lock, whether the leader may
// propose a KeepAliveSession of session id now: this lessor is primary,
// tracks the session, its deadline has not passed and no ExpireSession of it
// is decided or in flight (as Renewable does for a lock).
//
// Errors: ErrExpired, ErrNotHeld (no such session tracked), ErrNotPrimary,
// ErrClosed. ErrNotHeld read from a deposed leader may be stale: confirm
// leadership before answering with it.
func (l *Lessor) SessionRenewable(id uint64) error {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.renewableLease(sessionLease(id), now); err != nil {
		return fmt.Errorf("session %d: %w", id, err)
	}
	return nil
}

// SessionRemaining returns how long the lease of session id has left on this
// node's clock (0 once its deadline passed or it is expiring) and true, or
// false when this node does not track the session.
func (l *Lessor) SessionRemaining(id uint64) (time.Duration, bool) {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.remaining(sessionLease(id), now)
}

// SessionExpiring reports whether the lease of session id has ended by this
// node's measure: its deadline passed or its ExpireSession was decided. Every
// holder under it is then about to be removed.
func (l *Lessor) SessionExpiring(id uint64) bool {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expired(sessionLease(id), now)
}

// Sessions returns the number of sessions this node times.
func (l *Lessor) Sessions() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sessions
}

// attach records holder h under session s; l.mu held.
func (l *Lessor) attach(h lockID, s uint64) {
	if old, ok := l.under[h]; ok && old != s {
		l.detach(h)
	}
	l.under[h] = s
	m := l.members[s]
	if m == nil {
		m = map[lockID]struct{}{}
		l.members[s] = m
	}
	m[h] = struct{}{}
}

// detach forgets holder h's session, if any; l.mu held.
func (l *Lessor) detach(h lockID) {
	s, ok := l.under[h]
	if !ok {
		return
	}
	delete(l.under, h)
	if m := l.members[s]; m != nil {
		delete(m, h)
		if len(m) == 0 {
			delete(l.members, s)
		}
	}
}
