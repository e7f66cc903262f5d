package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// retryable reports whether err carries a code a client may retry on
// (docs/api.md#errors: Unavailable; DeadlineExceeded for an attempt's own timeout).
func retryable(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded:
		return true
	}
	return false
}

// rollingLoad is a bounded acquire/renew/release load over raw Connect
// clients that retries only on retryable codes, moving to the next node,
// and records every violation.
type rollingLoad struct {
	c    *ticketdtest.Cluster
	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	problems []string
	grants   map[string]uint64 // key → acknowledged token
	held0    chan struct{}     // closed once holder 0 holds its lock
	ops      int
	retries  int
}

func (l *rollingLoad) problem(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.problems) < 20 {
		l.problems = append(l.problems, fmt.Sprintf(format, args...))
	}
}

func (l *rollingLoad) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// call runs fn against node after node until it succeeds, fails with a
// code that is not retryable (returned), or the load stops. ambiguous
// reports whether an earlier attempt failed in a way that may have taken
// effect.
func (l *rollingLoad) call(start int, what string, fn func(ctx context.Context, node int) error) (err error, ambiguous bool) {
	node := start % l.c.Len()
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = fn(ctx, node)
		cancel()
		if err == nil || !retryable(err) {
			if attempt > 0 {
				l.mu.Lock()
				l.retries += attempt
				l.mu.Unlock()
			}
			return err, ambiguous
		}
		ambiguous = true
		if attempt > 400 {
			l.problem("%s: still failing after %d attempts: %v", what, attempt, err)
			return err, ambiguous
		}
		node = (node + 1) % l.c.Len()
		time.Sleep(25 * time.Millisecond)
	}
}

// holder holds one long lock for the whole test, renewing it every second:
// a NotFound means the lock expired early.
func (l *rollingLoad) holder(w int) {
	defer l.wg.Done()
	key := fmt.Sprintf("roll/long/%d", w)
	var tok uint64
	err, _ := l.call(w, "acquire "+key, func(ctx context.Context, n int) error {
		res, err := l.c.Lock(n).Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: 8000, Owner: key})
		tok = res.GetToken()
		return err
	})
	if err != nil {
		l.problem("acquire %s: %v", key, err)
		return
	}
	l.mu.Lock()
	l.grants[key] = tok
	l.mu.Unlock()
	if w == 0 {
		close(l.held0)
	}
	for !l.stopped() {
		time.Sleep(time.Second)
		err, _ := l.call(w, "renew "+key, func(ctx context.Context, n int) error {
			_, err := l.c.Lock(n).Renew(ctx, &ticketv1.RenewRequest{Key: key, Token: tok})
			return err
		})
		if err != nil {
			l.problem("renew %s token %d: %v (lock expired early?)", key, tok, err)
			return
		}
	}
}

// churner acquires, renews and releases short-lived keys in a loop.
func (l *rollingLoad) churner(w int) {
	defer l.wg.Done()
	for j := 0; !l.stopped(); j++ {
		key := fmt.Sprintf("roll/%d/%d", w, j)
		var tok uint64
		err, _ := l.call(j, "acquire "+key, func(ctx context.Context, n int) error {
			res, err := l.c.Lock(n).Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: 8000, Owner: key})
			tok = res.GetToken()
			return err
		})
		if err != nil {
			l.problem("acquire %s: %v", key, err)
			return
		}
		l.mu.Lock()
		l.grants[key] = tok
		l.ops++
		l.mu.Unlock()
		err, _ = l.call(j, "renew "+key, func(ctx context.Context, n int) error {
			_, err := l.c.Lock(n).Renew(ctx, &ticketv1.RenewRequest{Key: key, Token: tok})
			return err
		})
		if err != nil {
			l.problem("renew %s token %d: %v", key, tok, err)
			return
		}
		err, ambiguous := l.call(j, "release "+key, func(ctx context.Context, n int) error {
			_, err := l.c.Lock(n).Release(ctx, &ticketv1.ReleaseRequest{Key: key, Token: tok})
			return err
		})
		if err != nil && !(ambiguous && connect.CodeOf(err) == connect.CodeNotFound) {
			l.problem("release %s token %d: %v", key, tok, err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waiter keeps an Acquire with wait=true queued on a key that holder 0
// never releases: it must never be granted, and every attempt ends with a
// retryable code (Unavailable when its leader stops, DeadlineExceeded when
// its own timeout passes).
func (l *rollingLoad) waiter() {
	defer l.wg.Done()
	select {
	case <-l.held0:
	case <-l.stop:
		return
	}
	for i := 0; !l.stopped(); i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		res, err := l.c.Lock(i%l.c.Len()).Acquire(ctx, &ticketv1.AcquireRequest{Key: "roll/long/0", LeaseMs: 8000, Wait: true, Owner: "waiter"})
		cancel()
		switch {
		case err == nil:
			l.problem("waiter was granted roll/long/0 (token %d) while its holder renews it", res.GetToken())
			return
		case !retryable(err):
			l.problem("waiter: %v", err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRollingRestart restarts the three nodes one after another (SIGTERM:
// the leader hands leadership over) under a bounded acquire/renew/release
// load, on both backends: no lock expires early, no request fails without a
// retryable code, every acknowledged grant survives (docs/operations.md#rolling-restart).
func TestRollingRestart(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		c := start(t, backend)
		l := &rollingLoad{c: c, stop: make(chan struct{}), grants: map[string]uint64{}, held0: make(chan struct{})}
		const workers = 3
		for w := range workers {
			l.wg.Add(2)
			go l.holder(w)
			go l.churner(w)
		}
		l.wg.Add(1)
		go l.waiter()
		time.Sleep(500 * time.Millisecond)
		for i := range c.Len() {
			c.Restart(i)
			eventually(t, func() bool {
				code, _ := probe(c, i, "/readyz")
				return code == http.StatusOK
			}, fmt.Sprintf("%s ready after restart", c.Node(i).ID))
			time.Sleep(500 * time.Millisecond)
		}
		close(l.stop)
		l.wg.Wait()
		require.Empty(t, l.problems)
		t.Logf("%s: %d acquire/renew/release rounds, %d retried attempts", backend, l.ops, l.retries)
		require.Positive(t, l.ops)

		// Every acknowledged grant survives: the long locks are held with
		// their tokens; no token was given to two keys.
		ctx := ctxT(t)
		lead := c.Leader(t)
		for w := range workers {
			key := fmt.Sprintf("roll/long/%d", w)
			res, err := c.Lock(lead).CheckToken(ctx, &ticketv1.CheckTokenRequest{Key: key, Token: l.grants[key]})
			require.NoError(t, err)
			require.True(t, res.GetValid(), "%s token %d lost (current %d)", key, l.grants[key], res.GetCurrentToken())
		}
		seen := map[uint64]string{}
		for key, tok := range l.grants {
			if other, dup := seen[tok]; dup {
				t.Fatalf("token %d acknowledged for both %s and %s", tok, key, other)
			}
			seen[tok] = key
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatal("test context expired")
		}
	})
}
