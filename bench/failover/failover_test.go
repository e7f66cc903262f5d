package failover_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/failover"
)

// TestRun kills the leader of a real three-process cluster of each backend
// once and checks that every kill gives a figure and every process's CPU
// is accounted.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ticketd and runs real processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin, err := failover.Build(ctx, "", t.TempDir())
	require.NoError(t, err)
	for _, backend := range []string{"hashicorp", "etcd"} {
		t.Run(backend, func(t *testing.T) {
			res, err := failover.Run(ctx, failover.Config{
				Binary: bin, Backend: backend, Dir: filepath.Join(t.TempDir(), "c"), Kills: 1,
				Logf: func(f string, a ...any) { t.Logf("%s "+f, append([]any{time.Now().Format("15:04:05.000")}, a...)...) },
			})
			require.NoError(t, err)
			require.Len(t, res.Kills, 1)
			for i, k := range res.Kills {
				require.NoError(t, k.Err, "kill %d", i+1)
				require.Positive(t, k.Took)
				t.Logf("kill %d: %v", i+1, k.Took)
			}
			require.Len(t, res.CPU, 1+failover.Size)
			for _, c := range res.CPU {
				require.Positive(t, c.CPUSec, c.Process)
			}
		})
	}
}

func TestRunInvalidConfig(t *testing.T) {
	_, err := failover.Run(context.Background(), failover.Config{Backend: "etcd"})
	require.ErrorIs(t, err, failover.ErrInvalidConfig)
}
