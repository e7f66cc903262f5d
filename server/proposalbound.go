package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// This file bounds the proposals a node makes detached from any client's
// context (a Grant, a session's KeepAlive round, a shared renewal entry, a
// CloseSession): each may take at most proposeTimeout, after which its
// outcome is unknown to the caller (ErrOutcomeUnknown), and each ends when
// the node closes.
//
// A context.WithTimeout per proposal costs a runtime timer: an allocation,
// an insertion into the runtime's timer heap under its lock, and a removal
// when it is cancelled. The leader paid that once per Acquire and once per
// KeepAlive, on top of the timers of the request itself. So proposals that
// start within one window (proposeTimeout / boundWindows) share one
// context, made by the first of them, whose deadline is proposeTimeout
// after it was made: a proposal of that window is bounded by between
// proposeTimeout − window and proposeTimeout. Sharing is safe because no
// proposal cancels its bound: a shared context ends only at its deadline or
// with the node's life, never because one of its proposals returned.

// boundWindows is how many windows one proposeTimeout spans: a shared bound
// is handed out for proposeTimeout / boundWindows (100 ms of the default
// 10 s), so a detached proposal may end up to 1% earlier than
// proposeTimeout, and at most boundWindows bounds are alive at a time.
const boundWindows = 100

// proposalBounds hands out the shared bounds of detached proposals. The
// zero value is ready to use; it is safe for concurrent use.
type proposalBounds struct {
	cur atomic.Pointer[proposalBound] // the bound of the current window; nil before the first
	mu  sync.Mutex                    // held while a new window's bound is made
}

// proposalBound is the context of one window.
type proposalBound struct {
	ctx context.Context
	// cancel releases ctx's timer; ctx's own deadline calls it. It is kept
	// (never called early: the window's other proposals still use ctx) so
	// that the context package's contract, and go vet, see it owned.
	cancel context.CancelFunc
	until  time.Time // handed out until then
}

// get returns the context that bounds a detached proposal starting now:
// done timeout after the start of the current window at the latest, or
// when life ends. A timeout change (tests shorten Node.proposeTimeout)
// applies from the next window.
func (b *proposalBounds) get(life context.Context, timeout time.Duration) context.Context {
	now := time.Now()
	if c := b.cur.Load(); c != nil && now.Before(c.until) {
		return c.ctx
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.cur.Load(); c != nil && now.Before(c.until) {
		return c.ctx // another proposal made it meanwhile
	}
	ctx, cancel := context.WithTimeout(life, timeout)
	b.cur.Store(&proposalBound{ctx: ctx, cancel: cancel, until: now.Add(timeout / boundWindows)})
	return ctx
}

// detached returns the bound of a proposal the node makes now on behalf of
// a client that may have gone: proposeTimeout (give or take a window, see
// above) and the node's life.
func (n *Node) detached() context.Context { return n.bounds.get(n.life, n.proposeTimeout) }
