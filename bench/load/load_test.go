package load_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/cputime"
	"github.com/ticketd/ticketd/bench/load"
)

func TestRunClosedCountsEveryRecordedOp(t *testing.T) {
	const workers = 4
	var busy [workers]atomic.Bool
	var overlap, calls atomic.Int64
	op := func(ctx context.Context, w int) error {
		if !busy[w].CompareAndSwap(false, true) {
			overlap.Add(1)
		}
		calls.Add(1)
		time.Sleep(200 * time.Microsecond)
		busy[w].Store(false)
		return nil
	}
	res, err := load.Run(context.Background(), load.Config{Concurrency: workers, Duration: 100 * time.Millisecond, Warmup: 20 * time.Millisecond}, op)
	require.NoError(t, err)
	require.Zero(t, overlap.Load(), "calls for one worker overlapped")
	require.Equal(t, load.ModeClosed, res.Mode)
	require.Positive(t, res.Ops)
	require.Less(t, res.Ops, calls.Load(), "warm-up calls must not be recorded")
	require.Equal(t, res.Ops, res.Latency.Count)
	require.InDelta(t, float64(res.Ops)/0.1, res.PerSec, 1e-6)
	require.Equal(t, 0.1, res.ElapsedSec)
	require.GreaterOrEqual(t, res.Latency.P50US, 200.0, "latency is at least the op's own sleep")
	require.True(t, res.Latency.Ordered())
}

func TestRunCountsErrors(t *testing.T) {
	boom := errors.New("boom")
	var n atomic.Int64
	op := func(ctx context.Context, w int) error {
		if n.Add(1)%2 == 0 {
			return boom
		}
		return nil
	}
	res, err := load.Run(context.Background(), load.Config{Concurrency: 1, Duration: 50 * time.Millisecond}, op)
	require.NoError(t, err)
	require.Positive(t, res.Errors)
	require.Positive(t, res.Ops)
	require.Equal(t, "boom", res.FirstError)
}

// A closed-loop window in which no operation started and succeeded (here
// the first one, started in the warm-up, outlasts the window) goes on with
// MinOps until one has, and says how long it was.
func TestRunClosedMinOpsExtendsTheWindow(t *testing.T) {
	const warmup, window = 10 * time.Millisecond, 10 * time.Millisecond
	var calls atomic.Int64
	op := func(ctx context.Context, w int) error {
		if calls.Add(1) == 1 {
			time.Sleep(warmup + window + 20*time.Millisecond)
		}
		return nil
	}
	res, err := load.Run(context.Background(), load.Config{Concurrency: 1, Duration: window, Warmup: warmup, MinOps: 1}, op)
	require.NoError(t, err)
	require.Positive(t, res.Ops)
	require.Greater(t, res.WindowSec, window.Seconds())
	require.Equal(t, res.WindowSec, res.ElapsedSec)
	require.InDelta(t, float64(res.Ops)/res.WindowSec, res.PerSec, 1e-6)
}

// MinOps extends a window at most OpTimeout past its Duration: operations
// that never succeed end it there.
func TestRunClosedMinOpsGivesUpAfterOpTimeout(t *testing.T) {
	const window, opTimeout = 10 * time.Millisecond, 30 * time.Millisecond
	boom := errors.New("boom")
	res, err := load.Run(context.Background(), load.Config{Concurrency: 2, Duration: window, MinOps: 1, OpTimeout: opTimeout},
		func(ctx context.Context, w int) error { return boom })
	require.NoError(t, err)
	require.Zero(t, res.Ops)
	require.Positive(t, res.Errors)
	require.InDelta(t, (window + opTimeout).Seconds(), res.WindowSec, 1e-9)
}

// In open loop a slow operation delays the ones scheduled after it, and their
// latency counts from when they should have been sent: with one worker, a 2 ms
// operation and one scheduled every 1 ms, the k-th operation cannot start
// before k*2 ms although it was due at k*1 ms.
func TestRunOpenMeasuresFromIntendedTime(t *testing.T) {
	const opTime = 2 * time.Millisecond
	op := func(ctx context.Context, w int) error {
		time.Sleep(opTime)
		return nil
	}
	cfg := load.Config{Mode: load.ModeOpen, Concurrency: 1, Rate: 1000, Duration: 100 * time.Millisecond}
	res, err := load.Run(context.Background(), cfg, op)
	require.NoError(t, err)
	require.Positive(t, res.Ops)
	// At least 20 operations ran (each ≥2 ms within ≥40 ms), so the last had
	// waited ≥ 20 ms past its due time.
	if res.Ops >= 20 {
		require.GreaterOrEqual(t, res.Latency.MaxUS, 20_000.0)
	}
	require.Greater(t, res.Latency.MaxUS, 2*float64(opTime/time.Microsecond))
	require.Equal(t, 1000.0, res.RatePerSec)
	// 100 operations were due in the window, each taking ≥2 ms on one worker:
	// draining them takes ≥200 ms, so the achieved rate is at most 500/s.
	require.EqualValues(t, 100, res.Ops)
	require.GreaterOrEqual(t, res.ElapsedSec, 0.2)
	require.LessOrEqual(t, res.PerSec, 500.0)
}

func TestRunStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	op := func(ctx context.Context, w int) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	}
	_, err := load.Run(ctx, load.Config{Concurrency: 2, Duration: time.Hour}, op)
	require.ErrorIs(t, err, context.Canceled)
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  load.Config
	}{
		{"zero_concurrency", load.Config{Duration: time.Second}},
		{"zero_duration", load.Config{Concurrency: 1}},
		{"negative_warmup", load.Config{Concurrency: 1, Duration: time.Second, Warmup: -1}},
		{"open_without_rate", load.Config{Mode: load.ModeOpen, Concurrency: 1, Duration: time.Second}},
		{"unknown_mode", load.Config{Mode: "bursty", Concurrency: 1, Duration: time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load.Run(context.Background(), tc.cfg, nil)
			require.ErrorIs(t, err, load.ErrInvalidConfig)
		})
	}
}

func TestParseLevels(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []int
	}{
		{name: "plain", in: "1,16,64,256", want: []int{1, 16, 64, 256}},
		{name: "spaces_and_empty_items", in: " 2, 8,,", want: []int{2, 8}},
		{name: "not_a_number", in: "1,a"},
		{name: "zero", in: "0,4"},
		{name: "empty", in: " , "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := load.ParseLevels(tc.in)
			if tc.want == nil {
				require.ErrorIs(t, err, load.ErrInvalidConfig)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			again, err := load.ParseLevels(load.FormatLevels(got))
			require.NoError(t, err)
			require.Equal(t, got, again, "FormatLevels writes what ParseLevels reads")
		})
	}
}

// With a Meter, Run reports the CPU of the window: here this process is
// the client side and spins in every operation, so its CPU is positive; the
// server side (also this process) is read at the same instants.
func TestRunMetersTheWindow(t *testing.T) {
	op := func(ctx context.Context, w int) error {
		x := 0
		for i := range 200_000 {
			x += i
		}
		_ = x
		return nil
	}
	meter := &cputime.Meter{Servers: []int{0}, Clients: []int{0}}
	for _, mode := range []load.Mode{load.ModeClosed, load.ModeOpen} {
		t.Run(string(mode), func(t *testing.T) {
			res, err := load.Run(context.Background(), load.Config{Mode: mode, Rate: 20000, Concurrency: 2, Duration: 200 * time.Millisecond, Warmup: 20 * time.Millisecond, CPU: meter}, op)
			require.NoError(t, err)
			require.Empty(t, res.CPUError)
			require.NotNil(t, res.CPU)
			require.Positive(t, res.CPU.WallSec)
			require.Positive(t, res.CPU.ClientSec)
			require.Equal(t, res.CPU.ServerSec, res.CPU.ClientSec, "the same process, sampled at the same instants")
			require.Equal(t, 1, res.CPU.ClientProcs)
		})
	}
	res, err := load.Run(context.Background(), load.Config{Concurrency: 1, Duration: 20 * time.Millisecond}, op)
	require.NoError(t, err)
	require.Nil(t, res.CPU, "no Meter, no CPU figure")
}
