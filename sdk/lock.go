package sdk

import (
	"context"
	"errors"
	"fmt"
	"time"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// Grant is one lock granted by the server, as Acquire returns it.
type Grant struct {
	// Key is the lock key.
	Key string
	// Token is the fencing token: strictly greater than every token granted
	// before it, cluster-wide (Chubby §2.4 "sequencer"). Pass it to the
	// resource the lock guards.
	Token uint64
	// TTL is the lease length the server granted (its lease_ms).
	TTL time.Duration
	// Owner is the owner id the request carried.
	Owner string
	// Session is the session the lock is held under (0: a lease of its own).
	Session uint64
	// Sent is the local time the request was sent; when retries were needed,
	// the send time of the earliest attempt that may have produced the
	// grant. The server keeps the lock at least until Sent+TTL unless it is
	// released (the lease is a lower bound measured from the grant, which
	// comes after the send).
	Sent time.Time
}

// Mode is how a key is held (AcquireRequest.mode).
type Mode int

const (
	// ModeExclusive: one holder at a time, or up to limit holders of a
	// semaphore. The default.
	ModeExclusive Mode = iota
	// ModeShared: any number of shared holders at once, never beside an
	// exclusive one (RLock; Chubby shared locks).
	ModeShared
)

// String returns "exclusive" or "shared".
func (m Mode) String() string {
	if m == ModeShared {
		return "shared"
	}
	return "exclusive"
}

// modeOf converts the API's mode.
func modeOf(m ticketv1.Mode) Mode {
	if m == ticketv1.Mode_MODE_SHARED {
		return ModeShared
	}
	return ModeExclusive
}

// Holder is one holder of a key: an exclusive lock has one, a shared key or
// a semaphore may have several, each with its own fencing token.
type Holder struct {
	// Token is the holder's fencing token.
	Token uint64
	// Owner is the owner id of the holder's Acquire request.
	Owner string
	// TTL is the holder's lease (its session's TTL when Session is set).
	TTL time.Duration
	// Remaining is the lease time left as the answering node measures it;
	// negative when unknown (a stale read).
	Remaining time.Duration
	// Session is the session the holder is under (0: a lease of its own).
	Session uint64
}

// LockInfo describes who holds a key, as GetLock and ListLocks report it.
type LockInfo struct {
	// Key is the lock key.
	Key string
	// Held is false when nobody holds the key (then the other fields are zero).
	Held bool
	// Token is the holder's fencing token. Token, TTL, Remaining and Owner
	// describe the holder of an exclusive lock (Mode exclusive, Limit 0);
	// for a shared key or a semaphore they are zero: read Holders.
	Token uint64
	// TTL is the lease length of the holder (lease_ms).
	TTL time.Duration
	// Remaining is the time left before the answering node would expire the
	// lock if it is not renewed, as that node measures it (a follower's
	// figure is only indicative: only the leader expires locks).
	Remaining time.Duration
	// Owner is the owner id of the holder's Acquire request.
	Owner string
	// Mode is how the key is held.
	Mode Mode
	// Limit is the key's semaphore slot count, 0 for a lock.
	Limit uint32
	// Holders lists every holder in token order (one for an exclusive lock).
	Holders []Holder
}

// HolderOf returns the holder whose Acquire carried owner.
func (l LockInfo) HolderOf(owner string) (Holder, bool) {
	for _, h := range l.Holders {
		if h.Owner == owner {
			return h, true
		}
	}
	return Holder{}, false
}

// ms turns an API field in milliseconds (lease_ms, remaining_ms) into a Duration.
func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// heldLock is what GetLockResponse and ListLocksResponse's LockInfo both
// tell about a held lock.
type heldLock interface {
	GetToken() uint64
	GetLeaseMs() int64
	GetRemainingMs() int64
	GetOwner() string
	GetHolders() []*ticketv1.Holder
	GetMode() ticketv1.Mode
	GetLimit() uint32
}

// lockInfoOf converts the holders of key as the API reports them. A server
// that predates shared locks and semaphores sends only the singular fields: they
// become the one holder.
func lockInfoOf(key string, l heldLock) LockInfo {
	info := LockInfo{
		Key: key, Held: true, Token: l.GetToken(), TTL: ms(l.GetLeaseMs()),
		Remaining: ms(l.GetRemainingMs()), Owner: l.GetOwner(), Mode: modeOf(l.GetMode()), Limit: l.GetLimit(),
	}
	for _, h := range l.GetHolders() {
		info.Holders = append(info.Holders, Holder{Token: h.GetToken(), Owner: h.GetOwner(), TTL: ms(h.GetLeaseMs()),
			Remaining: ms(h.GetRemainingMs()), Session: h.GetSession()})
	}
	if len(info.Holders) == 0 && info.Token != 0 {
		info.Holders = []Holder{{Token: info.Token, Owner: info.Owner, TTL: info.TTL, Remaining: info.Remaining}}
	}
	return info
}

// Acquire asks for key for a lease of ttl (sent in whole milliseconds) and
// returns the grant. It is the building block of Lock and TryLock: it does
// not renew the lease and returns no Lease; most callers want Lock, TryLock,
// RLock or Semaphore. WithShared, WithLimit, WithSession and WithSessionID
// ask for a shared hold, a semaphore slot, or a lock under a session (then
// ttl may be 0: the session's TTL is the lease).
//
// Every attempt of one call carries the same owner id (a fresh client-made
// one unless WithOwner is given), so a retry after an ambiguous failure gets
// the grant the earlier attempt produced instead of waiting behind it.
// WithWait waits in the key's FIFO queue on the leader until the key is
// granted or ctx ends.
//
// Errors: ErrLocked (held by another owner, without WithWait),
// ErrInvalidArgument, ErrResourceExhausted, *LimitMismatchError
// (ErrLimitMismatch), ErrSessionNotFound, the servers' FailedPrecondition
// (the WithOwner id already holds or is acquiring the key in another mode,
// limit or session), *AmbiguousError (ErrAmbiguous:
// ctx ended while an attempt may have been granted), or the ctx error
// wrapping the last failure (often ErrUnavailable).
func (c *Client) Acquire(ctx context.Context, key string, ttl time.Duration, opts ...AcquireOption) (Grant, error) {
	ac, made := c.acquireConfigOf(opts)
	return c.acquire(ctx, key, ttl, ac, made)
}

// WithLockDelay asks that, if the lock ends because its lease ran out (not
// by Unlock or Release), the servers grant the key to nobody for d after the
// expiry (Chubby's lock-delay, Consul's session lock_delay; sent in whole
// milliseconds as AcquireRequest.lock_delay_ms). It protects a resource that
// cannot check fencing tokens from the late writes of a holder that lost its
// lease without noticing. Waiters stay queued and are served when it ends.
// The servers bound d (lease.max_lock_delay_ms, default 60 s): a larger one
// fails with ErrInvalidArgument.
func WithLockDelay(d time.Duration) AcquireOption {
	return func(c *acquireConfig) { c.lockDelay = d }
}

// acquireConfigOf applies opts and, when WithOwner is not among them, gives
// the request a fresh owner id of the client's own (made is then true).
func (c *Client) acquireConfigOf(opts []AcquireOption) (ac acquireConfig, made bool) {
	for _, o := range opts {
		o(&ac)
	}
	if ac.owner == "" {
		ac.owner, made = c.newOwner(), true
	}
	return ac, made
}

// acquire sends Acquire with retries. made says the owner id is the
// client's own, never reused after this call: only then may an ambiguous
// grant be released in the background without taking it from a caller that
// retries with the same owner.
func (c *Client) acquire(ctx context.Context, key string, ttl time.Duration, ac acquireConfig, made bool) (Grant, error) {
	req := &ticketv1.AcquireRequest{Key: key, LeaseMs: ttl.Milliseconds(), Wait: ac.wait, Owner: ac.owner, LockDelayMs: ac.lockDelay.Milliseconds(),
		Limit: ac.limit, Session: ac.sessionID}
	if ac.shared {
		req.Mode = ticketv1.Mode_MODE_SHARED
	}
	if ac.session != nil {
		req.Session = ac.session.ID()
	}
	if ttl <= 0 && req.Session != 0 {
		ttl = c.cfg.sessionTTL // bounds the clean-up of an ambiguous grant
		if ac.session != nil {
			ttl = ac.session.TTL()
		}
	}
	spec := callSpec{op: "acquire", key: key, owner: ac.owner, toLeader: true, mutates: true}
	if !ac.wait {
		spec.timeout = c.cfg.requestTimeout
	}
	res, out, err := invoke(ctx, c, spec, func(ctx context.Context, n *node) (*ticketv1.AcquireResponse, error) {
		return n.lock.Acquire(ctx, req)
	})
	if err != nil {
		if made && errors.Is(err, ErrAmbiguous) {
			c.releaseOwned(key, ac.owner, ttl)
		}
		return Grant{}, err
	}
	g := Grant{Key: key, Token: res.GetToken(), TTL: ms(res.GetLeaseMs()), Owner: ac.owner, Session: res.GetSession(), Sent: out.firstMaybe}
	if g.TTL <= 0 {
		g.TTL = ttl
	}
	return g, nil
}

// releaseOwned releases, in the background, the lock on key if owner holds
// it: the clean-up after an ambiguous Acquire. It gives up after ttl, when
// the server expires such a grant anyway.
func (c *Client) releaseOwned(key, owner string, ttl time.Duration) {
	c.goBackground(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, ttl)
		defer cancel()
		info, err := c.GetLock(ctx, key)
		if err != nil {
			return
		}
		if h, ok := info.HolderOf(owner); ok {
			_ = c.Release(ctx, key, h.Token)
		}
	})
}

// Renew extends the lease of the lock on key held with token by its TTL,
// measured by the leader from when it handles the request, and returns that
// TTL. It is what a Lease does in the background; call it yourself only for
// locks taken with Acquire.
//
// Errors: ErrNotHeld (the lock is no longer held with token: expired,
// released or re-granted), ErrInvalidArgument, or the ctx error wrapping the
// last failure.
func (c *Client) Renew(ctx context.Context, key string, token uint64) (time.Duration, error) {
	ttl, _, err := c.renew(ctx, key, token, 0)
	return ttl, err
}

// renew sends Renew with retries and returns the TTL and the send time of
// the acknowledged attempt. For a lease of ttl (0: unknown), attempts are
// bounded by ttl/3 and retries back off at most ttl/8, so that a renewal
// gets several tries on several nodes before the lease runs out.
func (c *Client) renew(ctx context.Context, key string, token uint64, ttl time.Duration) (time.Duration, time.Time, error) {
	req := &ticketv1.RenewRequest{Key: key, Token: token}
	spec := callSpec{op: "renew", key: key, toLeader: true, timeout: c.cfg.requestTimeout}
	spec.boundRenewal(ttl)
	res, out, err := invoke(ctx, c, spec, func(ctx context.Context, n *node) (*ticketv1.RenewResponse, error) {
		return n.lock.Renew(ctx, req)
	})
	if err != nil {
		return 0, time.Time{}, err
	}
	return ms(res.GetLeaseMs()), out.sent, nil
}

// Release ends the lock on key held with token. A lock granted since with
// another token is never touched, so a late or repeated Release is harmless.
// When an earlier attempt of this call may have released the lock and a
// later one finds it gone, Release reports success.
//
// Errors: ErrNotHeld (no lock on key with that token), ErrInvalidArgument,
// *AmbiguousError (ctx ended while an attempt may have released the lock).
func (c *Client) Release(ctx context.Context, key string, token uint64) error {
	req := &ticketv1.ReleaseRequest{Key: key, Token: token}
	spec := callSpec{op: "release", key: key, toLeader: true, timeout: c.cfg.requestTimeout, mutates: true}
	_, out, err := invoke(ctx, c, spec, func(ctx context.Context, n *node) (*ticketv1.ReleaseResponse, error) {
		return n.lock.Release(ctx, req)
	})
	if errors.Is(err, ErrNotHeld) && out.maybeEarlier {
		return nil
	}
	return err
}

// GetLock reports who holds key. By default the answer is linearizable (the
// leader confirms its leadership first); WithStale lets any node answer from
// its local state.
//
// Errors: ErrInvalidArgument, or the ctx error wrapping the last failure.
func (c *Client) GetLock(ctx context.Context, key string, opts ...ReadOption) (LockInfo, error) {
	rc := readConfigOf(opts)
	req := &ticketv1.GetLockRequest{Key: key, Stale: rc.stale}
	spec := callSpec{op: "get", key: key, toLeader: !rc.stale, timeout: c.cfg.requestTimeout}
	res, _, err := invoke(ctx, c, spec, func(ctx context.Context, n *node) (*ticketv1.GetLockResponse, error) {
		return n.lock.GetLock(ctx, req)
	})
	if err != nil {
		return LockInfo{}, err
	}
	if !res.GetHeld() {
		return LockInfo{Key: key}, nil
	}
	return lockInfoOf(key, res), nil
}

// listPageSize is the page size ListLocks and ListSessions ask for (the
// servers cap it at their own limit).
const listPageSize = 500

// ListLocks returns every held lock whose key starts with prefix, in key
// order, fetching as many pages as needed. It is linearizable per page
// unless WithStale is given; locks may change between pages.
//
// Errors: ErrInvalidArgument, or the ctx error wrapping the last failure.
func (c *Client) ListLocks(ctx context.Context, prefix string, opts ...ReadOption) ([]LockInfo, error) {
	rc := readConfigOf(opts)
	var (
		locks []LockInfo
		page  string
	)
	for {
		req := &ticketv1.ListLocksRequest{Prefix: prefix, PageSize: listPageSize, PageToken: page, Stale: rc.stale}
		spec := callSpec{op: "list", key: prefix, toLeader: !rc.stale, timeout: c.cfg.requestTimeout}
		res, _, err := invoke(ctx, c, spec, func(ctx context.Context, n *node) (*ticketv1.ListLocksResponse, error) {
			return n.lock.ListLocks(ctx, req)
		})
		if err != nil {
			return nil, err
		}
		for _, l := range res.GetLocks() {
			locks = append(locks, lockInfoOf(l.GetKey(), l))
		}
		page = res.GetNextPageToken()
		if page == "" {
			return locks, nil
		}
	}
}

// Check tells whether token is still a current holder of key
// (CheckToken, Chubby's CheckSequencer), and returns the newest holder's
// token (0 when the key is free; for an exclusive lock, its holder's). The
// answer is linearizable. A resource guarded by the lock can call it before
// accepting a write; cheaper is to remember the highest token seen and
// refuse lower ones (see examples/fenced-counter). CheckToken also says how
// the key is held.
//
// Errors: ErrInvalidArgument (token 0), or the ctx error wrapping the last
// failure.
func (c *Client) Check(ctx context.Context, key string, token uint64) (valid bool, current uint64, err error) {
	tc, err := c.CheckToken(ctx, key, token)
	return tc.Valid, tc.Current, err
}

// TokenCheck is CheckToken's answer.
type TokenCheck struct {
	// Valid is true when the token is one of key's current holders and its
	// lease has not run out (any holder of a shared key or a semaphore, not
	// only the newest: docs/semantics.md#fencing-shared-holders).
	Valid bool
	// Current is the newest (highest) token holding key, 0 when it is free.
	Current uint64
	// Mode and Limit are the key's while it is held.
	Mode  Mode
	Limit uint32
}

// CheckToken is Check with the key's mode and limit: a linearizable "is
// token a current holder of key?" for a downstream resource that guards
// writes with fencing tokens (Chubby's CheckSequencer).
//
// Errors: ErrInvalidArgument (token 0), or the ctx error wrapping the last
// failure.
func (c *Client) CheckToken(ctx context.Context, key string, token uint64) (TokenCheck, error) {
	req := &ticketv1.CheckTokenRequest{Key: key, Token: token}
	spec := callSpec{op: "check", key: key, toLeader: true, timeout: c.cfg.requestTimeout}
	res, _, err := invoke(ctx, c, spec, func(ctx context.Context, n *node) (*ticketv1.CheckTokenResponse, error) {
		return n.lock.CheckToken(ctx, req)
	})
	if err != nil {
		return TokenCheck{}, err
	}
	return TokenCheck{Valid: res.GetValid(), Current: res.GetCurrentToken(), Mode: modeOf(res.GetMode()), Limit: res.GetLimit()}, nil
}

// Lock waits in the key's FIFO queue on the leader until key is granted
// exclusively, or ctx ends, and returns the Lease. With ttl > 0 the lock has
// a lease of its own of ttl (sent in whole milliseconds, within the
// server's --lease-min-ms and --lease-max-ms), which the Lease renews in the
// background until Unlock. With ttl 0 it is held under the client's default
// session (WithSessionTTL) and kept alive by that session's KeepAlive;
// WithSession holds it under another session, whatever ttl says. Waiters displaced by a leader change are queued
// again on the new leader (their place in line is not kept).
//
// Errors: ErrInvalidArgument, ErrResourceExhausted, *LimitMismatchError
// (the key is a semaphore), *AmbiguousError (ErrAmbiguous, also wrapping
// the ctx error: ctx ended while the request may have been granted; the
// client releases such a grant in the background), or the ctx error
// wrapping the last failure.
func (c *Client) Lock(ctx context.Context, key string, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	return c.lock(ctx, key, ttl, true, opts)
}

// TryLock takes key exclusively if nobody holds it, and returns the Lease,
// with a lease of its own of ttl or, for ttl 0, under a session, as for
// Lock. It does not wait: a held key fails at once with ErrLocked.
//
// Errors: ErrLocked, ErrInvalidArgument, ErrResourceExhausted,
// *LimitMismatchError, *AmbiguousError, or the ctx error wrapping the last
// failure.
func (c *Client) TryLock(ctx context.Context, key string, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	return c.lock(ctx, key, ttl, false, opts)
}

// RLock waits in the key's FIFO queue until key is granted shared (the
// read side of a readers-writer lock: Curator InterProcessReadWriteLock,
// Chubby shared locks), and returns the Lease. Shared holders coexist; an
// exclusive Lock waits until none holds the key, and a waiting exclusive
// request holds back every RLock that arrives after it (writer
// preference: writers never starve). Each shared holder gets a fencing
// token of its own. The lock is held under the client's default session
// unless WithLease gives it a lease of its own or WithSession another
// session.
//
// Errors: as Lock's.
func (c *Client) RLock(ctx context.Context, key string, opts ...AcquireOption) (*Lease, error) {
	return c.lock(ctx, key, 0, true, append(opts, WithShared()))
}

// TryRLock is RLock without waiting: a key held exclusively, or with an
// exclusive request waiting, fails at once with ErrLocked.
//
// Errors: as TryLock's.
func (c *Client) TryRLock(ctx context.Context, key string, opts ...AcquireOption) (*Lease, error) {
	return c.lock(ctx, key, 0, false, append(opts, WithShared()))
}

// maxSessionRetries bounds how often one lock call opens a new default
// session after finding the last one gone.
const maxSessionRetries = 3

// lock is Lock, TryLock, RLock, TryRLock and Semaphore's Acquire and
// TryAcquire: it acquires key and returns the Lease. A lease of its own
// whose grant arrived so late that its send time no longer bounds the lease
// well is renewed first; a lock under a session is timed by its session.
func (c *Client) lock(ctx context.Context, key string, ttl time.Duration, wait bool, opts []AcquireOption) (*Lease, error) {
	ac, made := c.acquireConfigOf(opts)
	ac.wait = wait
	if ac.sessionID != 0 {
		return nil, fmt.Errorf("lock %q: %w: WithSessionID is for Acquire; use WithSession", key, ErrInvalidArgument)
	}
	if ttl <= 0 {
		ttl = ac.lease
	}
	useDefault := ttl <= 0 && ac.session == nil
	for retries := 0; ; {
		s := ac.session
		if useDefault {
			var err error
			if s, err = c.defaultSession(ctx); err != nil {
				return nil, fmt.Errorf("lock %q: default session: %w", key, err)
			}
		}
		if s != nil {
			sac := ac
			sac.session = s
			g, err := c.acquire(ctx, key, 0, sac, made)
			if err != nil {
				if errors.Is(err, ErrSessionNotFound) {
					s.finish(fmt.Errorf("%w: %w", ErrLeaseLost, err)) // the servers ended it
					if useDefault && retries < maxSessionRetries {
						retries++
						continue
					}
				}
				return nil, err
			}
			return c.newLease(g, sac, s)
		}
		g, err := c.acquire(ctx, key, ttl, ac, made)
		if err != nil {
			return nil, err
		}
		if !time.Now().After(renewAt(g.Sent, g.TTL)) {
			return c.newLease(g, ac, nil)
		}
		// The grant came long after the request was sent (a wait in the
		// queue, or retries): measure the lease afresh with a renewal
		// rather than from that old send time.
		rttl, sent, err := c.renew(ctx, key, g.Token, g.TTL)
		switch {
		case err == nil:
			g.TTL, g.Sent = rttl, sent
			return c.newLease(g, ac, nil)
		case errors.Is(err, ErrNotHeld):
			continue // the grant lapsed before it could be used: ask again
		case time.Now().Before(c.localDeadline(g.Sent, g.TTL)):
			return c.newLease(g, ac, nil) // still valid; its renewer keeps trying
		default:
			c.goBackground(func(ctx context.Context) {
				ctx, cancel := context.WithTimeout(ctx, g.TTL)
				defer cancel()
				_ = c.Release(ctx, key, g.Token)
			})
			return nil, fmt.Errorf("lock %q: token %d was granted but its lease ran out before it could be confirmed: %w: %w", key, g.Token, ErrLeaseLost, err)
		}
	}
}
