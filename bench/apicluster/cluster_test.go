package apicluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/config"

	"github.com/ticketd/ticketd/bench/apicluster"
)

func TestStartServeClose(t *testing.T) {
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cluster")
			c, err := apicluster.Start(context.Background(), apicluster.Config{Backend: backend, Dir: dir})
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(c.LeaderURL(), "http://127.0.0.1:"), c.LeaderURL())

			ctx := context.Background()
			now, err := c.CurrentLeaderURL(ctx)
			require.NoError(t, err)
			require.Equal(t, c.LeaderURL(), now, "no election since Start")
			acq, err := c.Client().Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 5000, Owner: "test"})
			require.NoError(t, err)
			require.Positive(t, acq.GetToken())
			_, err = c.Client().Release(ctx, &ticketv1.ReleaseRequest{Key: "k", Token: acq.GetToken()})
			require.NoError(t, err)

			require.NoError(t, c.Close())
			_, err = os.Stat(dir)
			require.ErrorIs(t, err, os.ErrNotExist, "Close removes the data")
		})
	}
}

func TestStartUnknownBackend(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster")
	_, err := apicluster.Start(context.Background(), apicluster.Config{Backend: "zookeeper", Dir: dir})
	require.Error(t, err)
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestStartInvalidConfig(t *testing.T) {
	_, err := apicluster.Start(context.Background(), apicluster.Config{Dir: t.TempDir()})
	require.ErrorIs(t, err, apicluster.ErrInvalidConfig)
	_, err = apicluster.Start(context.Background(), apicluster.Config{Backend: config.BackendEtcd})
	require.ErrorIs(t, err, apicluster.ErrInvalidConfig)
}

// Every node's goroutines carry its profiler label, so a CPU profile of the
// benchmark process can be split by node.
func TestNodesCarryProfileLabels(t *testing.T) {
	c, err := apicluster.Start(context.Background(), apicluster.Config{Backend: config.BackendHashicorp, Dir: filepath.Join(t.TempDir(), "cluster")})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	var b strings.Builder
	require.NoError(t, pprof.Lookup("goroutine").WriteTo(&b, 1))
	for _, id := range []string{"n1", "n2", "n3"} {
		require.Contains(t, b.String(), fmt.Sprintf("%q:%q", apicluster.ProfileLabel, id))
	}
}
