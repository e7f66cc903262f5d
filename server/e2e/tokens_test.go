package e2e_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// TestTokensIncreaseAcrossKeysAndLeaders acquires on followers (forwarded)
// and on the leader, across a leadership transfer and a leader kill: every
// token is strictly greater than all before it.
func TestTokensIncreaseAcrossKeysAndLeaders(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		c := start(t, backend)
		ctx := ctxT(t)
		var last uint64
		n := 0
		acquireRound := func() {
			t.Helper()
			l := c.Leader(t)
			for _, i := range c.Running() {
				n++
				res, err := c.Lock(i).Acquire(ctx, &ticketv1.AcquireRequest{Key: fmt.Sprintf("tok/%d", n), LeaseMs: 60_000})
				require.NoError(t, err, "acquire on node %d (leader %d)", i, l)
				require.Greater(t, res.GetToken(), last, "tokens strictly increase")
				last = res.GetToken()
			}
		}
		acquireRound()

		old := c.Leader(t)
		f := follower(t, c)
		res, err := c.Cluster(f).TransferLeader(ctx, &ticketv1.TransferLeaderRequest{}) // forwarded
		require.NoError(t, err)
		require.NotEqual(t, c.Node(old).ID, res.GetLeaderId())
		eventually(t, func() bool { return c.Leader(t) != old }, "new leader after transfer")
		acquireRound()

		c.Kill(c.Leader(t))
		c.WaitLeader(t, safety)
		acquireRound()
		require.Equal(t, uint64(n), last, "one token per grant, none skipped")
	})
}
