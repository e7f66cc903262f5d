package floor_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/floor"
	"github.com/ticketd/ticketd/bench/latency"
)

// TestDiskAppend runs both durable-append measurements; each must time every
// sample asked for and leave nothing behind in dir.
func TestDiskAppend(t *testing.T) {
	for name, measure := range map[string]func(context.Context, string, floor.Config) (latency.Summary, error){
		"fsync":  floor.Fsync,
		"badger": floor.Badger,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := measure(context.Background(), dir, floor.Config{Samples: 20})
			require.NoError(t, err)
			require.EqualValues(t, 20, s.Count)
			require.Positive(t, s.P50US)
			require.True(t, s.Ordered())
			left, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Empty(t, left, "the measurement's files must be removed")
		})
	}
}

func TestFsyncMissingDir(t *testing.T) {
	_, err := floor.Fsync(context.Background(), t.TempDir()+"/missing", floor.Config{Samples: 1})
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestRTT(t *testing.T) {
	s, err := floor.RTT(context.Background(), floor.Config{Samples: 100})
	require.NoError(t, err)
	require.EqualValues(t, 100, s.Count)
	require.Positive(t, s.P50US)
	require.True(t, s.Ordered())
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := floor.Fsync(ctx, t.TempDir(), floor.Config{Samples: 5})
	require.ErrorIs(t, err, context.Canceled)
	_, err = floor.Badger(ctx, t.TempDir(), floor.Config{Samples: 5})
	require.ErrorIs(t, err, context.Canceled)
	_, err = floor.RTT(ctx, floor.Config{Samples: 5})
	require.ErrorIs(t, err, context.Canceled)
}
