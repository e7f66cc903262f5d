package server_test

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// sample reads one sample (exact name and labels as exposed) from a node's
// /metrics, 0 when absent.
func sample(t *testing.T, in *nodetest.Instance, name string) float64 {
	t.Helper()
	res, err := http.Get("http://" + in.Addr + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	return 0
}

// TestForwardedCountedOnce: an Acquire sent to a follower is counted once
// in rpc_requests_total (on the follower the client called), and in
// rpc_forwarded_total with role follower there and role leader on the
// leader; the leader's rpc_requests_total does not count it again. The
// Raft gauges and build info are exported.
func TestForwardedCountedOnce(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, 3)
	l, f := c.Leader(t), c.Follower(t)
	const proc = `procedure="/ticket.v1.LockService/Acquire"`
	requests := `ticketd_rpc_requests_total{code="ok",` + proc + `}`
	fwd := func(role string) string {
		return `ticketd_rpc_forwarded_total{code="ok",` + proc + `,role="` + role + `"}`
	}
	leaderBefore, followerBefore := sample(t, l, requests), sample(t, f, requests)

	_, err := f.Lock.Acquire(context.Background(), &ticketv1.AcquireRequest{Key: "fwd", LeaseMs: 60_000})
	require.NoError(t, err)

	require.Equal(t, followerBefore+1, sample(t, f, requests), "follower counts the client's request")
	require.Equal(t, leaderBefore, sample(t, l, requests), "leader must not count a forwarded request again")
	require.Equal(t, 1.0, sample(t, f, fwd("follower")))
	require.Equal(t, 1.0, sample(t, l, fwd("leader")))

	require.GreaterOrEqual(t, sample(t, l, "ticketd_term"), 1.0)
	require.GreaterOrEqual(t, sample(t, l, "ticketd_commit_index"), 1.0)
	require.GreaterOrEqual(t, sample(t, l, "ticketd_leader_changes_total"), 1.0)
	require.Equal(t, 1.0, sample(t, l, "ticketd_has_leader"))
	require.Equal(t, 3.0, sample(t, l, "ticketd_members"))
	require.Equal(t, 1.0, sample(t, l, `ticketd_build_info{backend="hashicorp",version="dev"}`))
	require.Greater(t, sample(t, l, "ticketd_log_appended_entries_total"), 0.0, "the backend reports its appends")
	require.Greater(t, sample(t, l, "ticketd_log_append_duration_seconds_count"), 0.0)

	// A refused renewal and a waiting Acquire are counted where the client called.
	_, err = f.Lock.Renew(context.Background(), &ticketv1.RenewRequest{Key: "fwd", Token: 999})
	require.Error(t, err)
	require.Equal(t, 1.0, sample(t, f, "ticketd_renewals_refused_total"))
	_, err = f.Lock.Acquire(context.Background(), &ticketv1.AcquireRequest{Key: "free", LeaseMs: 60_000, Wait: true})
	require.NoError(t, err)
	require.Equal(t, 1.0, sample(t, f, "ticketd_acquire_wait_duration_seconds_count"))
}
