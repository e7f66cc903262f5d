package workload_test

import (
	"bufio"
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/config"

	"github.com/ticketd/ticketd/bench/apicluster"
	"github.com/ticketd/ticketd/bench/workload"
)

// KeepAlives holds keys locks per session on a real cluster, keeps each
// session alive per call through the SDK (over the session's
// KeepAliveStream: the leader answers them on streams), and its close
// function releases every lock.
func TestKeepAlivesHoldAndRenewSessions(t *testing.T) {
	ctx := context.Background()
	c, err := apicluster.Start(ctx, apicluster.Config{Backend: config.BackendHashicorp, Dir: filepath.Join(t.TempDir(), "c")})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })

	const workers, keys = 3, 4
	keeper, err := sdk.New([]string{c.LeaderURL()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = keeper.Close() })
	op, closeAll, err := workload.KeepAlives(ctx, c.Client(), keeper, workers, keys, "t")
	require.NoError(t, err)

	list, err := c.Client().ListLocks(ctx, &ticketv1.ListLocksRequest{Prefix: "bench/t/keepalive/"})
	require.NoError(t, err)
	require.Len(t, list.GetLocks(), workers*keys, "every session holds its locks")
	sessions := map[uint64]int{}
	for _, l := range list.GetLocks() {
		for _, h := range l.GetHolders() {
			sessions[h.GetSession()]++
		}
	}
	require.Len(t, sessions, workers, "one session per worker")
	for s, n := range sessions {
		require.NotZero(t, s)
		require.Equal(t, keys, n)
	}

	for w := range workers {
		require.NoError(t, op(ctx, w))
		require.NoError(t, op(ctx, w))
	}
	require.Equal(t, 2.0*workers, streamAnswers(t, c.LeaderURL()), "every keep-alive went over a stream")

	require.NoError(t, closeAll(ctx))
	list, err = c.Client().ListLocks(ctx, &ticketv1.ListLocksRequest{Prefix: "bench/t/keepalive/"})
	require.NoError(t, err)
	require.Empty(t, list.GetLocks(), "closing the sessions released their locks")
	require.Error(t, op(ctx, 0), "a closed session cannot be kept alive")
}

// streamAnswers reads ticketd_keepalive_stream_messages_total from the
// /metrics of the node at base URL url.
func streamAnswers(t *testing.T, url string) float64 {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "ticketd_keepalive_stream_messages_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	t.Fatal("no ticketd_keepalive_stream_messages_total in /metrics")
	return 0
}
