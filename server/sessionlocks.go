package server

import (
	"fmt"
	"sync"
)

// This file is limits.max_locks_per_session (docs/security.md#quotas): the
// locks one session may hold, counted on the leader before an Acquire under
// it queues or proposes anything. It bounds the one entry that ends a
// session: its apply (which stalls every other proposal behind it) and the
// watch events it makes, one per holder, which must fit a watcher's buffer
// (config: limits.watch_buffer_events ≥ limits.max_locks_per_session).

// sessionSlots counts, per session, the Acquire requests under it that this
// node admitted against the cap and that have not returned yet (waiting or
// with a grant in flight), so that concurrent requests cannot overshoot it,
// as leaderState.sessionCreates does for limits.max_sessions. The zero value is
// ready; safe for concurrent use.
type sessionSlots struct {
	mu sync.Mutex
	n  map[uint64]int // session id → admitted requests in progress
}

// reserveSessionLock admits r against limits.max_locks_per_session: the locks
// held under r.session (core.StateMachine.SessionLockLen) plus the requests
// under it in progress on this node must stay below the cap. An idempotent
// retry by a holder already under the session on r.key (holder is its
// holderID) adds no lock and is always admitted. On success the caller must
// call the returned release once its request is over; a request whose grant
// has applied but that has not released yet counts twice for that short
// moment, so a concurrent request at the cap may be refused early, never
// admitted beyond it. Errors: ErrSessionFull (ResourceExhausted).
func (n *Node) reserveSessionLock(r acquireRequest, holder string) (release func(), err error) {
	lim := n.cfg.Limits.MaxLocksPerSession
	if r.session == 0 || lim <= 0 || n.holdsUnderSession(r, holder) {
		return func() {}, nil
	}
	s := &n.lead.sessSlots
	s.mu.Lock()
	defer s.mu.Unlock()
	if held := n.sm.SessionLockLen(r.session) + s.n[r.session]; held >= lim {
		return nil, fmt.Errorf("%w: session %d holds or is acquiring %d locks (limits.max_locks_per_session is %d)",
			ErrSessionFull, r.session, held, lim)
	}
	if s.n == nil {
		s.n = map[uint64]int{}
	}
	s.n[r.session]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.n[r.session]--; s.n[r.session] <= 0 {
			delete(s.n, r.session)
		}
	}, nil
}

// holdsUnderSession reports whether holder (a holderID) already holds r.key
// under r.session: r is then an idempotent retry that returns that holder.
func (n *Node) holdsUnderSession(r acquireRequest, holder string) bool {
	for _, lk := range n.sm.Holders(r.key) {
		if lk.Session == r.session && holderID(lk.Owner, lk.Principal) == holder {
			return true
		}
	}
	return false
}
