package e2e_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// TestLeaderKillLockSurvives kills the leader (kill -9) while two locks are
// held: both survive on the new leader with their tokens; the holder of one
// renews it there; each then expires only once its lease, counted from the
// client's own send time of its last grant or renewal, has passed.
func TestLeaderKillLockSurvives(t *testing.T) {
	const lease = 3000 * time.Millisecond
	matrix(t, func(t *testing.T, backend string) {
		c := start(t, backend)
		ctx := ctxT(t)
		l := c.Leader(t)

		sentA := time.Now()
		a, err := c.Lock(l).Acquire(ctx, &ticketv1.AcquireRequest{Key: "failover/renewed", LeaseMs: lease.Milliseconds(), Owner: "a"})
		require.NoError(t, err)
		sentB := time.Now()
		b, err := c.Lock(l).Acquire(ctx, &ticketv1.AcquireRequest{Key: "failover/idle", LeaseMs: lease.Milliseconds(), Owner: "b"})
		require.NoError(t, err)

		c.Kill(l)
		nl := c.WaitLeader(t, safety)
		require.NotEqual(t, l, nl)

		for key, tok := range map[string]uint64{"failover/renewed": a.GetToken(), "failover/idle": b.GetToken()} {
			got, err := c.Lock(nl).GetLock(ctx, &ticketv1.GetLockRequest{Key: key})
			require.NoError(t, err)
			if !got.GetHeld() {
				// Only legitimate if the lease already ran out (a very slow failover).
				require.GreaterOrEqual(t, time.Since(sentB), lease, "%s vanished before its lease", key)
				t.Skipf("failover took longer than the lease (%v); nothing left to check", lease)
			}
			assert.Equal(t, tok, got.GetToken(), "%s keeps its token on the new leader", key)
		}

		sentRenew := time.Now()
		ren, err := c.Lock(nl).Renew(ctx, &ticketv1.RenewRequest{Key: "failover/renewed", Token: a.GetToken()})
		if connect.CodeOf(err) == connect.CodeNotFound && time.Since(sentA) >= lease {
			// Only legitimate once the lease ran out: a failover slow enough
			// (a split vote, a second leader change) that the lock expired
			// between the GetLock above and the Renew.
			t.Skipf("failover took longer than the lease (%v); nothing left to check", lease)
		}
		require.NoError(t, err, "the holder renews on the new leader")
		assert.Equal(t, lease.Milliseconds(), ren.GetLeaseMs())

		goneAt := map[string]time.Time{}
		deadline := time.Now().Add(lease + safety)
		for len(goneAt) < 2 && time.Now().Before(deadline) {
			for _, key := range []string{"failover/renewed", "failover/idle"} {
				if _, done := goneAt[key]; done {
					continue
				}
				got, err := c.Lock(nl).GetLock(ctx, &ticketv1.GetLockRequest{Key: key})
				if connect.CodeOf(err) == connect.CodeUnavailable {
					// Another election (a starved machine): ask again. A
					// later answer only makes the measured lifetime longer,
					// and the check below is that it is never shorter.
					continue
				}
				require.NoError(t, err)
				if !got.GetHeld() {
					goneAt[key] = time.Now()
				}
			}
			time.Sleep(25 * time.Millisecond)
		}
		require.Len(t, goneAt, 2, "both locks expire eventually")
		assert.GreaterOrEqual(t, goneAt["failover/idle"].Sub(sentB), lease, "expired before its lease (from the Acquire's send time)")
		assert.GreaterOrEqual(t, goneAt["failover/renewed"].Sub(sentRenew), lease, "expired before its lease (from the Renew's send time)")
		t.Logf("idle lock gone %v after its Acquire was sent; renewed lock gone %v after its Renew was sent (lease %v)",
			goneAt["failover/idle"].Sub(sentB).Round(time.Millisecond), goneAt["failover/renewed"].Sub(sentRenew).Round(time.Millisecond), lease)

		_, err = c.Lock(nl).Renew(ctx, &ticketv1.RenewRequest{Key: "failover/renewed", Token: a.GetToken()})
		requireCode(t, connect.CodeNotFound, err)
	})
}
