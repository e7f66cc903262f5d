package fakeclock

import (
	"sync"
	"time"

	"github.com/ticketd/ticketd/server/lessor"
)

// Clock is a fake clock starting at a fixed instant. Safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*timer]struct{}
	armed  chan struct{} // closed and replaced whenever the set of timers changes
}

// New returns a Clock at 2025-01-01T00:00:00Z with no timers.
func New() *Clock {
	return &Clock{
		now:    time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		timers: map[*timer]struct{}{},
		armed:  make(chan struct{}),
	}
}

// Now returns the fake current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer firing once Advance moves time to now+d or later.
func (c *Clock) NewTimer(d time.Duration) lessor.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers[t] = struct{}{}
	c.changed()
	return t
}

// Advance moves time forward by d and fires every timer due by the new time.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for t := range c.timers {
		if !t.at.After(c.now) {
			delete(c.timers, t)
			t.ch <- c.now
		}
	}
	c.changed()
}

// Timers returns the number of armed (not fired, not stopped) timers.
func (c *Clock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitTimers blocks until exactly n timers are armed or timeout passes (real
// time, a safety net only) and reports whether the count was reached.
func (c *Clock) WaitTimers(n int, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		count, ch := len(c.timers), c.armed
		c.mu.Unlock()
		if count == n {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}

// changed wakes WaitTimers; c.mu held.
func (c *Clock) changed() {
	close(c.armed)
	c.armed = make(chan struct{})
}

type timer struct {
	c  *Clock
	at time.Time
	ch chan time.Time
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, ok := t.c.timers[t]
	if ok {
		delete(t.c.timers, t)
		t.c.changed()
	}
	return ok
}
