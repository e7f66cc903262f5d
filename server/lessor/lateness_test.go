package lessor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/lessor"
)

// TestExpiryDue: a lease's expiry is due on the leader at its deadline, or
// at the leader's taking office if that came later (no expiry is decided
// before it leads); its lateness is the time since, read once the Expire
// has applied. A follower's Due names no office.
func TestExpiryDue(t *testing.T) {
	type asked struct {
		due lessor.Due
		ok  bool
	}
	dues := make(chan asked, 10)
	var h *harness
	h = newHarness(t, func(c *lessor.Config) {
		expire := c.Expire
		c.Expire = func(ctx context.Context, key string, token, seen uint64) error {
			d, ok := h.l.ExpiryDue(key, token)
			dues <- asked{d, ok}
			return expire(ctx, key, token, seen)
		}
	})
	next := func() lessor.Due {
		t.Helper()
		select {
		case a := <-dues:
			require.True(t, a.ok, "the lease is tracked while its Expire is proposed")
			return a.due
		case <-time.After(wait):
			t.Fatal("no Expire proposed")
			return lessor.Due{}
		}
	}

	start := h.clock.Now()
	ta := h.grant("a", 1000)
	d, ok := h.l.ExpiryDue("a", ta)
	require.True(t, ok)
	assert.True(t, d.At.Equal(start.Add(time.Second)), "a follower: due at the deadline, got %v", d.At)
	assert.True(t, d.Office.IsZero(), "a follower has no office")

	h.clock.Advance(1500 * time.Millisecond) // the deadline passes before this node leads
	office := h.clock.Now()
	h.l.Promote(h.sm, testTerm)
	d = next()
	h.expectExpire("a", ta)
	assert.True(t, d.At.Equal(office), "due when it took office, not at the earlier deadline: %v", d.At)
	assert.True(t, d.Office.Equal(office))
	h.clock.Advance(300 * time.Millisecond)
	assert.Equal(t, 300*time.Millisecond, h.l.Late(d))

	tb := h.grant("b", 1000)
	h.settle(1)
	h.clock.Advance(time.Second)
	d = next()
	h.expectExpire("b", tb)
	assert.True(t, d.At.Equal(office.Add(1300*time.Millisecond)), "due at the deadline, after taking office: %v", d.At)
	assert.True(t, d.Office.Equal(office))
	assert.Equal(t, time.Duration(0), h.l.Late(d))
	assert.Equal(t, time.Duration(0), h.l.Late(lessor.Due{}), "a lease that was not tracked")

	_, ok = h.l.ExpiryDue("b", tb)
	assert.False(t, ok, "an expired lease is no longer tracked")
}
