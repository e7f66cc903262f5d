package sdk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// errUnlocking stops a renewer because Unlock takes over.
var errUnlocking = errors.New("ticketd: unlocking")

// Lease is a held lock: its key, its fencing token, and a signal that closes
// when the lease may have ended. It renews itself in the background every
// TTL/3 (measured from the send time of the last acknowledged grant or
// renewal, the period etcd clientv3's lease KeepAlive uses), retrying through
// leader changes, until Unlock, a refused renewal, the local deadline, or
// Client.Close.
//
// The local deadline is sent + TTL − margin, where sent is the local send
// time of the last acknowledged grant or renewal and margin =
// max(TTL·DefaultDriftRate, DefaultMinMargin) (see WithSafetyMargin). Every
// server measures the same lease from its own apply of that grant or
// renewal (a replicated command), which is later than sent, and no server
// ends it earlier than TTL after that — a new leader keeps the deadline it
// measured itself, never a shorter one — so Done closes before any server
// may expire the lock or grant the key to anyone else, across any number of
// leader changes, as long as the clocks' rates differ by less than the
// margin. The servers end an unrenewed lock no later than TTL + one election
// and barrier + one expiry round after sent (docs/semantics.md, The bound),
// so the ordering is: Done, then (≥ margin later) the earliest possible
// server expiry, then the removal. Done is closed by a timer at the
// deadline, not by polling. This is Chubby's local lease timeout (Burrows,
// OSDI 2006, §2.8): a conservative approximation of the server's, from the
// request's send time and an allowance for clock rate.
//
// Methods are safe for concurrent use.
type Lease struct {
	c     *Client
	key   string
	owner string
	token uint64

	done    chan struct{}
	stop    context.CancelCauseFunc // stops the renewer
	stopped chan struct{}           // closed when the renewer has returned

	unlockMu sync.Mutex // serialises Unlock calls

	mu       sync.Mutex
	ttl      time.Duration
	sent     time.Time // send time of the last acknowledged grant or renewal
	deadline time.Time
	timer    *time.Timer
	err      error // set once, when done is closed
	released bool
}

// margin is the safety margin kept back from a lease of ttl.
func (c *Client) margin(ttl time.Duration) time.Duration {
	return max(time.Duration(float64(ttl)*c.cfg.driftRate), c.cfg.minMargin)
}

// newLease starts the renewer and deadline timer for grant g.
func (c *Client) newLease(g Grant) (*Lease, error) {
	l := &Lease{
		c: c, key: g.Key, owner: g.Owner, token: g.Token,
		done: make(chan struct{}), stopped: make(chan struct{}),
		ttl: g.TTL, sent: g.Sent, deadline: g.Sent.Add(g.TTL - c.margin(g.TTL)),
	}
	ctx, stop := context.WithCancelCause(c.ctx)
	l.stop = stop
	l.mu.Lock()
	l.timer = time.AfterFunc(time.Until(l.deadline), l.onTimer)
	l.mu.Unlock()
	if !c.goBackground(func(context.Context) { l.renewLoop(ctx) }) {
		close(l.stopped)
		l.finish(fmt.Errorf("%w: %w", ErrLeaseLost, ErrClosed))
		return nil, fmt.Errorf("lock %q: %w", g.Key, ErrClosed)
	}
	return l, nil
}

// Key returns the lock key.
func (l *Lease) Key() string { return l.key }

// Token returns the fencing token of the grant (Chubby §2.4 sequencer):
// pass it with every write to the resource the lock guards, so that the
// resource can refuse writes from a holder whose lease has passed on.
func (l *Lease) Token() uint64 { return l.token }

// Owner returns the owner id the grant was requested with.
func (l *Lease) Owner() string { return l.owner }

// TTL returns the lease length the server last granted or renewed.
func (l *Lease) TTL() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

// Deadline returns the current local deadline: Done closes at this time
// unless a renewal is acknowledged first. It moves forward with every
// acknowledged renewal. Work guarded by the lease should end before it.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Done returns a channel that is closed when the lease may have ended: its
// local deadline passed without an acknowledged renewal, the server refused
// a renewal, Unlock was called, or the client was closed. Once closed it
// stays closed and Err is non-nil.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while Done is open. After it closes: ErrReleased after a
// successful Unlock; otherwise an error wrapping ErrLeaseLost, and also
// ErrNotHeld when the server refused a renewal or ErrClosed when the client
// was closed. The value does not change once set.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Unlock stops the renewals and releases the lock on the server, with the
// lease's token so that a lock granted to someone else since is never
// released. Done is closed when Unlock returns. Calling Unlock again after
// it succeeded returns nil at once; after a failure it tries again.
//
// Errors: ErrNotHeld (the server no longer held the lock with this token:
// the lease had ended, and Err then wraps ErrLeaseLost), *AmbiguousError,
// or the ctx error wrapping the last failure (the renewals are stopped
// anyway, so the server ends the lock when its TTL runs out).
func (l *Lease) Unlock(ctx context.Context) error {
	l.unlockMu.Lock()
	defer l.unlockMu.Unlock()
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	if released {
		return nil
	}
	l.stop(errUnlocking)
	<-l.stopped
	err := l.c.Release(ctx, l.key, l.token)
	switch {
	case err == nil:
		l.mu.Lock()
		l.released = true
		l.mu.Unlock()
		l.finish(ErrReleased)
	case errors.Is(err, ErrNotHeld):
		l.finish(fmt.Errorf("%w: %w", ErrLeaseLost, err))
	default:
		l.finish(fmt.Errorf("%w: renewals stopped by Unlock, release failed: %w", ErrLeaseLost, err))
	}
	return err
}

// finish closes Done with err unless it is closed already, and stops the
// timer and the renewer.
func (l *Lease) finish(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.finishLocked(err)
}

func (l *Lease) finishLocked(err error) {
	if l.err != nil {
		return
	}
	l.err = err
	l.timer.Stop()
	close(l.done)
	l.stop(err)
}

// onTimer runs at the local deadline: it closes Done unless a renewal has
// moved the deadline in the meantime.
func (l *Lease) onTimer() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	if d := time.Until(l.deadline); d > 0 {
		l.timer.Reset(d)
		return
	}
	l.finishLocked(fmt.Errorf("%w: key %q token %d: no renewal acknowledged before the local deadline", ErrLeaseLost, l.key, l.token))
}

// extend records an acknowledged renewal sent at sent that granted ttl.
func (l *Lease) extend(sent time.Time, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil || ttl <= 0 {
		return
	}
	l.ttl, l.sent = ttl, sent
	if d := sent.Add(ttl - l.c.margin(ttl)); d.After(l.deadline) {
		l.deadline = d
		l.timer.Reset(time.Until(d))
	}
}

// renewLoop renews the lease every TTL/3 until it ends or ctx is cancelled.
func (l *Lease) renewLoop(ctx context.Context) {
	defer close(l.stopped)
	for {
		l.mu.Lock()
		next, deadline, ttl := l.sent.Add(l.ttl/3), l.deadline, l.ttl
		l.mu.Unlock()
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			l.onStop(ctx)
			return
		case <-t.C:
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		rttl, sent, err := l.c.renew(rctx, l.key, l.token, ttl)
		cancel()
		switch {
		case err == nil:
			l.extend(sent, rttl)
		case ctx.Err() != nil:
			l.onStop(ctx)
			return
		case errors.Is(err, ErrNotHeld):
			l.finish(fmt.Errorf("%w: renewal refused: %w", ErrLeaseLost, err))
			return
		default:
			l.finish(fmt.Errorf("%w: key %q token %d: renewal failed: %w", ErrLeaseLost, l.key, l.token, err))
			return
		}
	}
}

// onStop handles the renewer's ctx ending: Unlock takes over, any other
// cause (Close, or the lease already finished) ends the lease.
func (l *Lease) onStop(ctx context.Context) {
	cause := context.Cause(ctx)
	if errors.Is(cause, errUnlocking) {
		return
	}
	if errors.Is(cause, ErrClosed) {
		l.finish(fmt.Errorf("%w: %w", ErrLeaseLost, ErrClosed))
		return
	}
	l.finish(fmt.Errorf("%w: %w", ErrLeaseLost, cause))
}
