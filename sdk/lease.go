package sdk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Lease is a held lock: its key, its fencing token, and a signal that closes
// when the lease may have ended. A lease of its own (Lock or TryLock with a
// ttl, WithLease) renews itself in the background every TTL/3 (measured
// from the send time of the last acknowledged grant or renewal, the period
// etcd clientv3's lease KeepAlive uses), retrying through leader changes,
// until Unlock, a refused renewal, the local deadline, or Client.Close. A
// lease under a session (RLock, Semaphore.Acquire and Lock with ttl 0 by
// default, or WithSession) is kept alive by its session's KeepAlive and ends
// when the session does (etcd concurrency.Mutex over a Session).
//
// The local deadline is sent + TTL − margin, where sent is the local send
// time of the last acknowledged grant or renewal (for a lease under a
// session: its session's last acknowledged KeepAlive) and margin =
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
// A lease under a session does not notice by itself that an administrator
// force-released its lock while the session lives on: the session's
// KeepAlive renews the session, not each lock. Fencing tokens still stop
// its writes.
//
// Methods are safe for concurrent use.
type Lease struct {
	keeper
	key     string
	owner   string
	token   uint64
	shared  bool
	limit   uint32
	session *Session // nil: a lease of its own

	unlockMu sync.Mutex // serialises Unlock calls
	released bool       // under keeper.mu
}

// newLease starts the renewer and deadline timer for grant g, or, for a
// grant under session s, follows s.
func (c *Client) newLease(g Grant, ac acquireConfig, s *Session) (*Lease, error) {
	l := &Lease{key: g.Key, owner: g.Owner, token: g.Token, shared: ac.shared, limit: ac.limit, session: s}
	l.name = fmt.Sprintf("key %q token %d", g.Key, g.Token)
	if s == nil {
		l.renew = func(ctx context.Context, ttl time.Duration) (time.Duration, time.Time, error) {
			return c.renew(ctx, l.key, l.token, ttl)
		}
		if err := l.start(c, g.Sent, g.TTL, l.renewLoop); err != nil {
			return nil, fmt.Errorf("lock %q: %w", g.Key, ErrClosed)
		}
		return l, nil
	}
	if err := l.start(c, g.Sent, g.TTL, l.followSession); err != nil {
		return nil, fmt.Errorf("lock %q: %w", g.Key, ErrClosed)
	}
	return l, nil
}

// followSession ends a lease under a session when its session ends (or
// when ctx is cancelled: Unlock, Client.Close).
func (l *Lease) followSession(ctx context.Context) {
	defer close(l.stopped)
	select {
	case <-ctx.Done():
		l.onStop(ctx)
	case <-l.session.Done():
		serr := l.session.Err()
		if errors.Is(serr, ErrReleased) {
			l.finish(fmt.Errorf("%w: %s: its session %d was closed", ErrReleased, l.name, l.session.ID()))
			return
		}
		l.finish(fmt.Errorf("%s: session %d ended: %w", l.name, l.session.ID(), serr))
	}
}

// Key returns the lock key.
func (l *Lease) Key() string { return l.key }

// Token returns the fencing token of the grant (Chubby §2.4 sequencer):
// pass it with every write to the resource the lock guards, so that the
// resource can refuse writes from a holder whose lease has passed on.
// Every holder of a shared key or a semaphore has a token of its own.
func (l *Lease) Token() uint64 { return l.token }

// Owner returns the owner id the grant was requested with.
func (l *Lease) Owner() string { return l.owner }

// Shared reports whether the lease is a shared hold (RLock, WithShared).
func (l *Lease) Shared() bool { return l.shared }

// Limit returns the semaphore's slot count the lease was acquired with
// (Semaphore, WithLimit), or 0 for a lock.
func (l *Lease) Limit() uint32 { return l.limit }

// Session returns the session the lease is held under, or nil for a lease
// of its own.
func (l *Lease) Session() *Session { return l.session }

// TTL returns the lease length the server last granted or renewed (for a
// lease under a session: the session's TTL).
func (l *Lease) TTL() time.Duration {
	if l.session != nil {
		return l.session.TTL()
	}
	return l.ttlNow()
}

// Deadline returns the current local deadline: Done closes at this time
// unless a renewal (or, under a session, a KeepAlive) is acknowledged
// first. It moves forward with every acknowledgement. Work guarded by the
// lease should end before it.
func (l *Lease) Deadline() time.Time {
	if l.session != nil {
		return l.session.Deadline()
	}
	return l.deadlineNow()
}

// Done returns a channel that is closed when the lease may have ended: its
// local deadline passed without an acknowledged renewal, the server refused
// a renewal, its session ended, Unlock was called, or the client was
// closed. Once closed it stays closed and Err is non-nil.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while Done is open. After it closes: ErrReleased after a
// successful Unlock or Session.Close of its session; otherwise an error
// wrapping ErrLeaseLost, and also ErrNotHeld when the server refused a
// renewal, ErrSessionNotFound when it refused its session's KeepAlive, or
// ErrClosed when the client was closed. The value does not change once set.
func (l *Lease) Err() error { return l.errNow() }

// Unlock stops the renewals and releases the lock on the server, with the
// lease's token so that a lock granted to someone else since is never
// released. A lease under a session is released on its own; the session
// lives on. Done is closed when Unlock returns. Calling Unlock again after
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
