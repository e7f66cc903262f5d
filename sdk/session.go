package sdk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// Session is one lease that many locks are held under (etcd clientv3
// concurrency.Session over an etcd lease, Consul sessions): one KeepAlive
// renews every lock in it in one replicated command, and when the session
// ends — closed, or its lease ran out — every lock in it is released in one
// committed entry. A Session keeps itself alive in the background every
// TTL/3 from the send time of its last acknowledged KeepAlive, retrying
// across leader changes, with the local deadline and safety margin of a
// Lease: Done closes before any server may end the session.
//
// Acquire under a session with WithSession. A Client also keeps one default
// session of its own, opened on first use, for RLock, Semaphore.Acquire and
// Lock with ttl 0 (WithSessionTTL).
//
// Methods are safe for concurrent use.
type Session struct {
	keeper
	id uint64

	closeMu sync.Mutex // serialises Close calls
	closed  bool       // under keeper.mu
}

// CreateSession opens a session of ttl (whole milliseconds, within the
// servers' lease bounds) and keeps it alive in the background until Close,
// a refused KeepAlive, its local deadline, or Client.Close. The session is
// bound to the client's principal. CreateSession is not idempotent: a
// retry after an ambiguous failure may leave an unused session behind,
// whose lease simply runs out.
//
// Errors: ErrInvalidArgument (ttl out of bounds), ErrResourceExhausted (the
// servers' session limit), ErrPermissionDenied, *AmbiguousError, or the ctx
// error wrapping the last failure.
func (c *Client) CreateSession(ctx context.Context, ttl time.Duration) (*Session, error) {
	req := &ticketv1.CreateSessionRequest{TtlMs: ttl.Milliseconds()}
	spec := callSpec{op: "create session", toLeader: true, timeout: c.cfg.requestTimeout, mutates: true}
	res, out, err := invoke(ctx, c, spec, func(ctx context.Context, n *node) (*ticketv1.CreateSessionResponse, error) {
		return n.lock.CreateSession(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	s := &Session{id: res.GetSession()}
	s.name = fmt.Sprintf("session %d", s.id)
	s.renew = func(ctx context.Context, ttl time.Duration) (time.Duration, time.Time, error) {
		return c.keepAlive(ctx, s.id, ttl)
	}
	got := ms(res.GetTtlMs())
	if got <= 0 {
		got = ttl
	}
	if err := s.start(c, out.firstMaybe, got, s.renewLoop); err != nil {
		return nil, err
	}
	return s, nil
}

// ID returns the session's id (AcquireRequest.session; never 0).
func (s *Session) ID() uint64 { return s.id }

// TTL returns the session's lease, as the servers last granted it.
func (s *Session) TTL() time.Duration { return s.ttlNow() }

// Deadline returns the session's local deadline: Done closes at this time
// unless a KeepAlive is acknowledged first.
func (s *Session) Deadline() time.Time { return s.deadlineNow() }

// Done returns a channel that is closed when the session may have ended
// (and with it every lock held under it): its local deadline passed without
// an acknowledged KeepAlive, the servers refused a KeepAlive (the session
// had ended), Close was called, or the client was closed.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns nil while Done is open. After it closes: ErrReleased after a
// successful Close; otherwise an error wrapping ErrLeaseLost, and also
// ErrSessionNotFound when the servers refused a KeepAlive or ErrClosed
// when the client was closed.
func (s *Session) Err() error { return s.errNow() }

// Close stops the keep-alives and ends the session on the servers, which
// release every lock held under it in one committed entry (etcd
// LeaseRevoke, Consul session destroy). Done (of the session and of its
// leases) is closed when Close returns. Calling Close again after it
// succeeded returns nil.
//
// Errors: ErrSessionNotFound (the session had already ended; Err then wraps
// ErrLeaseLost), *AmbiguousError, or the ctx error wrapping the last
// failure (the keep-alives are stopped anyway, so the session ends when its
// TTL runs out).
func (s *Session) Close(ctx context.Context) error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil
	}
	s.stop(errUnlocking)
	<-s.stopped
	err := s.c.CloseSession(ctx, s.id)
	switch {
	case err == nil:
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.finish(ErrReleased)
	case errors.Is(err, ErrSessionNotFound):
		s.finish(fmt.Errorf("%w: %w", ErrLeaseLost, err))
	default:
		s.finish(fmt.Errorf("%w: keep-alives stopped by Close, close failed: %w", ErrLeaseLost, err))
	}
	return err
}

// KeepAlive restarts the lease of session id, and with it the lease of
// every lock held under it, in one replicated command, and returns the
// session's TTL. A Session does this by itself; call it for a session
// kept alive by hand (ticketctl session keepalive). The keep-alives of a
// session go over one KeepAliveStream to the leader, opened by the first
// and kept open for the next ones (CloseSession or Close ends it); a node
// without it (an older ticketd) gets unary KeepAlive calls.
//
// Errors: ErrSessionNotFound (unknown or ended: its locks are gone; also
// another principal's, which servers answer exactly as an unknown one), or
// the ctx error wrapping the last failure.
func (c *Client) KeepAlive(ctx context.Context, id uint64) (time.Duration, error) {
	ttl, _, err := c.keepAlive(ctx, id, 0)
	return ttl, err
}

// keepAlive sends a keep-alive with retries, over the session's
// KeepAliveStream (unary KeepAlive to nodes without it), and returns the
// TTL and the send time of the acknowledged attempt, with the per-attempt
// bounds of renew.
func (c *Client) keepAlive(ctx context.Context, id uint64, ttl time.Duration) (time.Duration, time.Time, error) {
	req := &ticketv1.KeepAliveRequest{Session: id}
	spec := callSpec{op: "keepalive", key: fmt.Sprint(id), toLeader: true, timeout: c.cfg.requestTimeout}
	spec.boundRenewal(ttl)
	res, out, err := invoke(ctx, c, spec, func(ctx context.Context, n *node) (*ticketv1.KeepAliveResponse, error) {
		return c.keepAliveAt(ctx, n, req) // over the session's stream (keepalivestream.go)
	})
	if err != nil {
		return 0, time.Time{}, err
	}
	return ms(res.GetTtlMs()), out.sent, nil
}

// CloseSession ends session id and releases every lock held under it in
// one committed entry. Session.Close does this for a Session; call it for a
// session managed by hand (ticketctl session close). When an earlier
// attempt of this call may have closed the session and a later one finds it
// gone, CloseSession reports success.
//
// Errors: ErrSessionNotFound (unknown or already ended, or another
// principal's unless the caller is an admin), *AmbiguousError, or the ctx
// error wrapping the last failure.
func (c *Client) CloseSession(ctx context.Context, id uint64) error {
	req := &ticketv1.CloseSessionRequest{Session: id}
	spec := callSpec{op: "close session", key: fmt.Sprint(id), toLeader: true, timeout: c.cfg.requestTimeout, mutates: true}
	c.kaStreams.closeSession(id)
	_, out, err := invoke(ctx, c, spec, func(ctx context.Context, n *node) (*ticketv1.CloseSessionResponse, error) {
		return n.lock.CloseSession(ctx, req)
	})
	if errors.Is(err, ErrSessionNotFound) && out.maybeEarlier {
		return nil
	}
	return err
}

// defaultSession returns the client's default session, opening one (of
// the WithSessionTTL lease) when there is none or the last one ended.
func (c *Client) defaultSession(ctx context.Context) (*Session, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(c.sessStop, func() { cancel(ErrClosed) })()
	c.sessMu.Lock()
	defer c.sessMu.Unlock()
	if c.sess != nil && c.sess.Err() == nil {
		return c.sess, nil
	}
	if c.sessClosed || c.ctx.Err() != nil {
		return nil, fmt.Errorf("create session: %w", ErrClosed)
	}
	s, err := c.CreateSession(ctx, c.cfg.sessionTTL)
	if err != nil {
		return nil, err
	}
	c.sess = s
	return s, nil
}

// closeDefaultSession closes the default session, if any, releasing its
// locks; Close calls it before stopping the client.
func (c *Client) closeDefaultSession() {
	c.sessCancel()
	c.sessMu.Lock()
	s := c.sess
	c.sess, c.sessClosed = nil, true
	c.sessMu.Unlock()
	if s == nil || s.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.requestTimeout)
	defer cancel()
	_ = s.Close(ctx)
}
