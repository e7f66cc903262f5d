package server

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/ticketd/ticketd/core"
)

// This file is the node's role as the request path sees it: whether it is
// the promoted leader (the backend reported IsLeader and the lessor and wait
// queues have started; leadership.go), of which term, whether it is closing,
// a channel that tells waiting requests that any of it changed, and how long
// a request waits for such a change (route).

// role is the node's role. Its zero value is not ready: use newRole. Safe
// for concurrent use.
type role struct {
	mu       sync.Mutex
	promoted bool          // IsLeader event seen and not superseded
	term     uint64        // term of the last event
	changed  chan struct{} // closed and replaced on every leader event
	closing  bool          // Close has begun
	// serving is promoted && !closing, stored under mu (setServing) for
	// route's hot path, which reads it without mu.
	serving atomic.Bool
	// wait bounds how long a request waits for an election in progress or
	// this node's own promotion (WithLeaderWait); set once by newRole.
	wait time.Duration
}

// newRole returns the role of a node that has seen no leader event, whose
// requests wait up to wait for a leader.
func newRole(wait time.Duration) *role { return &role{changed: make(chan struct{}), wait: wait} }

// setServing publishes promoted && !closing to serving. Call it with mu held
// after changing promoted or closing, so that the stores happen in the order
// of the changes and serving always equals the state under mu once it is
// released.
func (r *role) setServing() { r.serving.Store(r.promoted && !r.closing) }

// observe records leader event ev: its term, and, unless ev makes this node
// leader and the node is not closing, that it is not promoted. It returns
// whether the node is closing.
func (r *role) observe(ev core.LeaderEvent) (closing bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !ev.IsLeader || r.closing {
		r.promoted = false
	}
	r.term = ev.Term
	r.setServing()
	return r.closing
}

// promote records that this node's promotion for term is done (the lessor
// and the wait queues have started), unless a later event has superseded
// that term meanwhile.
func (r *role) promote(term uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.promoted = r.term == term
	r.setServing()
}

// announce wakes every request waiting in route for a change: the event
// observed is fully handled.
func (r *role) announce() {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.changed)
	r.changed = make(chan struct{})
}

// close records that the node is closing and reports whether it was the
// promoted leader.
func (r *role) close() (wasLeader bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closing = true
	r.setServing()
	return r.promoted
}

// isServing reports whether this node is the promoted leader and not
// closing, without taking mu: route's hot path.
func (r *role) isServing() bool { return r.serving.Load() }

// isPromoted reports whether this node is the promoted leader.
func (r *role) isPromoted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.promoted
}

// isClosing reports whether Close has begun.
func (r *role) isClosing() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closing
}

// leads reports whether this node is the promoted leader of term and not
// closing.
func (r *role) leads(term uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.promoted && r.term == term && !r.closing
}

// promotedTerm returns the term this node is the promoted leader of, and
// whether it is (and is not closing).
func (r *role) promotedTerm() (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.term, r.promoted && !r.closing
}

// now returns, at one instant, whether this node is promoted, whether it is
// closing, and the channel closed at the next change.
func (r *role) now() (promoted, closing bool, changed <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.promoted, r.closing, r.changed
}
