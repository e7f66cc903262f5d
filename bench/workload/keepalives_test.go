package workload_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/config"

	"github.com/ticketd/ticketd/bench/apicluster"
	"github.com/ticketd/ticketd/bench/workload"
)

// KeepAlives holds keys locks per session on a real cluster, keeps each
// session alive per call, and its close function releases every lock.
func TestKeepAlivesHoldAndRenewSessions(t *testing.T) {
	ctx := context.Background()
	c, err := apicluster.Start(ctx, apicluster.Config{Backend: config.BackendHashicorp, Dir: filepath.Join(t.TempDir(), "c")})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })

	const workers, keys = 3, 4
	op, closeAll, err := workload.KeepAlives(ctx, c.Client(), workers, keys, "t")
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
	}

	require.NoError(t, closeAll(ctx))
	list, err = c.Client().ListLocks(ctx, &ticketv1.ListLocksRequest{Prefix: "bench/t/keepalive/"})
	require.NoError(t, err)
	require.Empty(t, list.GetLocks(), "closing the sessions released their locks")
	require.Error(t, op(ctx, 0), "a closed session cannot be kept alive")
}
