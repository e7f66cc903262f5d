package loadproc_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/load"
	"github.com/ticketd/ticketd/bench/loadproc"
)

// TestMain makes this test binary the client process when Run starts it.
func TestMain(m *testing.M) {
	if loadproc.Serve(measure) {
		return
	}
	os.Exit(m.Run())
}

// measure is the child's workload: "spin" burns CPU in every operation,
// "fail" fails before measuring, "pid" fails with the child's pid unless
// it differs from the server pid.
func measure(ctx context.Context, spec loadproc.Spec) (load.Result, error) {
	switch spec.Workload {
	case "spin":
		return load.Run(ctx, spec.Load, func(context.Context, int) error {
			x := 0
			for i := range 300_000 {
				x += i
			}
			_ = x
			return nil
		})
	case "wait":
		return load.Run(ctx, spec.Load, func(ctx context.Context, _ int) error {
			<-ctx.Done()
			return ctx.Err()
		})
	}
	return load.Result{}, errors.New("no such workload: " + spec.Workload)
}

func childConfig() loadproc.Config {
	return loadproc.Config{Exe: os.Args[0], Args: []string{"-test.run=^$"}}
}

// The client process's CPU is reported as the clients', the parent's (here
// idle, waiting) as the servers'.
func TestRunMetersChildAsClient(t *testing.T) {
	res, err := loadproc.Run(context.Background(), childConfig(), loadproc.Spec{
		Workload: "spin",
		Load:     load.Config{Concurrency: 2, Duration: 300 * time.Millisecond, Warmup: 50 * time.Millisecond},
	})
	require.NoError(t, err)
	require.Positive(t, res.Ops)
	require.Empty(t, res.CPUError)
	require.NotNil(t, res.CPU)
	require.Equal(t, 1, res.CPU.ServerProcs)
	require.Equal(t, 1, res.CPU.ClientProcs)
	require.Positive(t, res.CPU.ClientSec, "the child spun through the window")
	require.Greater(t, res.CPU.ClientSec, res.CPU.ServerSec, "the parent only waited")
}

func TestRunReportsChildFailure(t *testing.T) {
	_, err := loadproc.Run(context.Background(), childConfig(), loadproc.Spec{
		Workload: "nope", Load: load.Config{Concurrency: 1, Duration: time.Second},
	})
	require.ErrorIs(t, err, loadproc.ErrRun)
	require.Contains(t, err.Error(), "no such workload: nope")
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := loadproc.Run(ctx, childConfig(), loadproc.Spec{
			Workload: "wait", Load: load.Config{Concurrency: 1, Duration: time.Hour},
		})
		done <- err
	}()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}
