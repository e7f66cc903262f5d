package e2e_test

import (
	"fmt"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// TestWatchSessionEndLargerThanBuffer: a session holding more locks than a
// watcher's buffer (8 events; the per-session cap turned off for this) is
// closed. The one entry that ends it makes a RELEASED event per lock, which
// cannot fit the buffer: the node ends each watcher before any of them, and
// the SDK resumes at that entry's index and gets it whole from the history.
// SDK watchers on the leader and on a follower each see every RELEASED
// event exactly once, all with the entry's index.
func TestWatchSessionEndLargerThanBuffer(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		const locks = 20
		c := start(t, backend, "--limits-max-locks-per-session=0", "--limits-watch-buffer-events=8")
		ctx := ctxT(t)
		l := c.Leader(t)
		from := nextIndex(t, c)
		recs := []*recorder{
			watchOn(t, c, []int{l}, "sess/", sdk.WithStartIndex(from)),
			watchOn(t, c, []int{follower(t, c)}, "sess/", sdk.WithStartIndex(from)),
		}
		s, err := c.Lock(l).CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 60_000})
		require.NoError(t, err)
		var want []string
		for i := range locks {
			key := fmt.Sprintf("sess/%02d", i)
			g, err := c.Lock(l).Acquire(ctx, &ticketv1.AcquireRequest{Key: key, Owner: key, Session: s.GetSession()})
			require.NoError(t, err)
			want = append(want, fmt.Sprintf("RELEASED %s %d", key, g.GetToken()))
		}
		_, err = c.Lock(l).CloseSession(ctx, &ticketv1.CloseSessionRequest{Session: s.GetSession()})
		require.NoError(t, err)

		for i, r := range recs {
			got := r.waitFor(t, 2*locks, fmt.Sprintf("watcher %d sees the grants and the session's end", i))
			ended := got[locks:]
			assert.Equal(t, want, describe(ended), "watcher %d: every RELEASED event once, in key order", i)
			for _, ev := range ended {
				assert.Equal(t, ended[0].Index, ev.Index, "watcher %d: all at the ending entry's index", i)
			}
		}
		assert.GreaterOrEqual(t, metric(t, c, l, "ticketd_watchers_dropped_slow_total"), 1.0,
			"the leader's watcher was ended as too slow before the entry")
		for i, r := range recs {
			assert.Len(t, r.snapshot(), 2*locks, "watcher %d: nothing twice", i)
		}
	})
}

// TestMaxLocksPerSessionOnCluster: with limits.max_locks_per_session 4, a
// fifth Acquire under a session is ResourceExhausted, on the leader and
// through a follower, and nothing is written (the log does not grow); the
// same key without a session is granted.
func TestMaxLocksPerSessionOnCluster(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		c := start(t, backend, "--limits-max-locks-per-session=4")
		ctx := ctxT(t)
		l := c.Leader(t)
		s, err := c.Lock(l).CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 60_000})
		require.NoError(t, err)
		for i := range 4 {
			key := fmt.Sprintf("cap/%d", i)
			_, err := c.Lock(l).Acquire(ctx, &ticketv1.AcquireRequest{Key: key, Owner: key, Session: s.GetSession()})
			require.NoError(t, err)
		}
		eventually(t, func() bool {
			st := status(t, c, l)
			return st.AppliedIndex == st.CommitIndex
		}, "the leader applied everything")
		before := status(t, c, l)
		for _, node := range []int{l, follower(t, c)} {
			_, err := c.Lock(node).Acquire(ctx, &ticketv1.AcquireRequest{Key: "cap/4", Owner: "cap/4", Session: s.GetSession()})
			requireCode(t, connect.CodeResourceExhausted, err)
			assert.Contains(t, err.Error(), "limits.max_locks_per_session")
		}
		requireUnchanged(t, before, status(t, c, l))
		_, err = c.Lock(l).Acquire(ctx, &ticketv1.AcquireRequest{Key: "cap/4", Owner: "cap/4", LeaseMs: 60_000})
		require.NoError(t, err, "a lock under no session is not counted")
	})
}
