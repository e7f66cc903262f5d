package sdk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// errUnlocking stops a renewer because Unlock (or Session.Close) takes over.
var errUnlocking = errors.New("ticketd: unlocking")

// Renewal timing of a lease of its own and of a session, as fractions of
// the TTL. The TypeScript SDK uses the same (sdk/testdata/client-spec.json,
// checked by both SDKs' tests).
const (
	// renewPeriodDivisor: a lease is renewed every TTL/3 from the send time
	// of its last acknowledged grant or renewal (etcd clientv3's lease
	// KeepAlive period), so a renewal can fail twice before the lease is lost.
	renewPeriodDivisor = 3
	// renewAttemptTimeoutDivisor: one attempt of a renewal is bounded by
	// TTL/3 (or the request timeout, when smaller), so a renewal gets
	// several tries on several nodes before the lease runs out.
	renewAttemptTimeoutDivisor = 3
	// renewBackoffCapDivisor: the retries of a renewal back off at most
	// TTL/8 (or the client's cap, when smaller).
	renewBackoffCapDivisor = 8
)

// renewAt is when a lease of ttl acknowledged for a request sent at sent
// is next renewed.
func renewAt(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(ttl / renewPeriodDivisor)
}

// localDeadline is the local deadline of a lease of ttl acknowledged for a
// request sent at sent: sent + ttl − margin (see Lease).
func (c *Client) localDeadline(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(ttl - c.margin(ttl))
}

// boundRenewal bounds the attempts and the retry backoff of spec, a
// renewal (Renew, KeepAlive) of a lease of ttl; ttl 0 (unknown) leaves
// spec as it is.
func (spec *callSpec) boundRenewal(ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	spec.timeout = min(spec.timeout, max(ttl/renewAttemptTimeoutDivisor, time.Millisecond))
	spec.backoff = max(ttl/renewBackoffCapDivisor, time.Millisecond)
}

// keeper is the local lease clock and renewal loop that a Lease and a
// Session share: the local deadline sent + TTL − margin, a timer that
// closes done at it, and a loop that renews every TTL/3 from the send time
// of the last acknowledged grant or renewal (etcd clientv3's lease
// KeepAlive period) and moves the deadline with every acknowledgement.
// Chubby's local lease timeout (Burrows, OSDI 2006, §2.8).
type keeper struct {
	c    *Client
	name string // what is kept, for errors: `key "a" token 7`, `session 12`
	// renew renews once, bounded by ctx, for a lease of ttl; it returns the
	// TTL granted and the send time of the acknowledged attempt. nil for a
	// lease under a session (its session's keeper renews it).
	renew func(ctx context.Context, ttl time.Duration) (time.Duration, time.Time, error)

	done    chan struct{}
	stop    context.CancelCauseFunc // stops the loop
	stopped chan struct{}           // closed when the loop has returned

	mu       sync.Mutex
	ttl      time.Duration
	sent     time.Time // send time of the last acknowledged grant or renewal
	deadline time.Time
	timer    *time.Timer // nil when renew is nil
	err      error       // set once, when done is closed
}

// start arms k for a grant of ttl sent at sent and runs loop (renewLoop,
// or a session follower) in the client's background. It returns
// ErrClosed, with done closed, when the client is closed.
func (k *keeper) start(c *Client, sent time.Time, ttl time.Duration, loop func(ctx context.Context)) error {
	k.c, k.done, k.stopped = c, make(chan struct{}), make(chan struct{})
	k.ttl, k.sent, k.deadline = ttl, sent, c.localDeadline(sent, ttl)
	ctx, stop := context.WithCancelCause(c.ctx)
	k.stop = stop
	if k.renew != nil {
		k.mu.Lock()
		k.timer = time.AfterFunc(time.Until(k.deadline), k.onTimer)
		k.mu.Unlock()
	}
	if !c.goBackground(func(context.Context) { loop(ctx) }) {
		close(k.stopped)
		k.finish(fmt.Errorf("%w: %w", ErrLeaseLost, ErrClosed))
		return fmt.Errorf("%s: %w", k.name, ErrClosed)
	}
	return nil
}

// margin is the safety margin kept back from a lease of ttl.
func (c *Client) margin(ttl time.Duration) time.Duration {
	return max(time.Duration(float64(ttl)*c.cfg.driftRate), c.cfg.minMargin)
}

// finish closes done with err unless it is closed already, and stops the
// timer and the loop.
func (k *keeper) finish(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.finishLocked(err)
}

func (k *keeper) finishLocked(err error) {
	if k.err != nil {
		return
	}
	k.err = err
	if k.timer != nil {
		k.timer.Stop()
	}
	close(k.done)
	k.stop(err)
}

// onTimer runs at the local deadline: it closes done unless a renewal has
// moved the deadline in the meantime.
func (k *keeper) onTimer() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		return
	}
	if d := time.Until(k.deadline); d > 0 {
		k.timer.Reset(d)
		return
	}
	k.finishLocked(fmt.Errorf("%w: %s: no renewal acknowledged before the local deadline", ErrLeaseLost, k.name))
}

// extend records an acknowledged renewal sent at sent that granted ttl.
func (k *keeper) extend(sent time.Time, ttl time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil || ttl <= 0 {
		return
	}
	k.ttl, k.sent = ttl, sent
	if d := k.c.localDeadline(sent, ttl); d.After(k.deadline) {
		k.deadline = d
		k.timer.Reset(time.Until(d))
	}
}

// renewLoop renews every TTL/3 until the lease ends or ctx is cancelled.
func (k *keeper) renewLoop(ctx context.Context) {
	defer close(k.stopped)
	for {
		k.mu.Lock()
		next, deadline, ttl := renewAt(k.sent, k.ttl), k.deadline, k.ttl
		k.mu.Unlock()
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			k.onStop(ctx)
			return
		case <-t.C:
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		rttl, sent, err := k.renew(rctx, ttl)
		cancel()
		switch {
		case err == nil:
			k.extend(sent, rttl)
		case ctx.Err() != nil:
			k.onStop(ctx)
			return
		case errors.Is(err, ErrNotHeld), errors.Is(err, ErrSessionNotFound):
			k.finish(fmt.Errorf("%w: renewal refused: %w", ErrLeaseLost, err))
			return
		default:
			k.finish(fmt.Errorf("%w: %s: renewal failed: %w", ErrLeaseLost, k.name, err))
			return
		}
	}
}

// onStop handles the loop's ctx ending: Unlock or Close takes over; any
// other cause (Client.Close, or the lease already finished) ends the lease.
func (k *keeper) onStop(ctx context.Context) {
	cause := context.Cause(ctx)
	if errors.Is(cause, errUnlocking) {
		return
	}
	if errors.Is(cause, ErrClosed) {
		k.finish(fmt.Errorf("%w: %w", ErrLeaseLost, ErrClosed))
		return
	}
	k.finish(fmt.Errorf("%w: %w", ErrLeaseLost, cause))
}

// errNow returns the error done was closed with, nil while open.
func (k *keeper) errNow() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// ttlNow and deadlineNow read the clock.
func (k *keeper) ttlNow() time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ttl
}

func (k *keeper) deadlineNow() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.deadline
}
