package floor_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/floor"
)

func TestFsync(t *testing.T) {
	dir := t.TempDir()
	s, err := floor.Fsync(context.Background(), dir, floor.Config{Samples: 20})
	require.NoError(t, err)
	require.EqualValues(t, 20, s.Count)
	require.Positive(t, s.P50US)
	require.True(t, s.Ordered())
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, left, "the measurement file must be removed")
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
	_, err = floor.RTT(ctx, floor.Config{Samples: 5})
	require.Error(t, err)
}

func TestBadger(t *testing.T) {
	dir := t.TempDir()
	s, err := floor.Badger(context.Background(), dir, floor.Config{Samples: 20})
	require.NoError(t, err)
	require.EqualValues(t, 20, s.Count)
	require.Positive(t, s.P50US)
	require.True(t, s.Ordered())
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, left, "the database must be removed")
}
