package handoff

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/load"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// at is t0 plus ms milliseconds.
func at(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }

func latencies(hs []Handoff) []time.Duration {
	var out []time.Duration
	for _, h := range hs {
		out = append(out, h.Latency())
	}
	return out
}

func TestMatch(t *testing.T) {
	tests := []struct {
		name   string
		cycles []Cycle
		want   []time.Duration
	}{
		{
			name: "tokens_out_of_record_order",
			cycles: []Cycle{
				{Token: 12, Acquired: at(5), Released: at(6)},
				{Token: 10, Acquired: at(0), Released: at(1)},
				{Token: 11, Acquired: at(1.5), Released: at(4)},
			},
			want: []time.Duration{500 * time.Microsecond, time.Millisecond},
		},
		{
			// The next holder's Acquire returned before the releasing
			// client's Release did: recorded as a negative handoff.
			name: "negative_kept",
			cycles: []Cycle{
				{Token: 1, Acquired: at(0), Released: at(2)},
				{Token: 2, Acquired: at(1.75), Released: at(3)},
			},
			want: []time.Duration{-250 * time.Microsecond},
		},
		{
			// Token 21's cycle failed (not recorded): 20 → 22 is no handoff.
			name: "token_gap_not_paired",
			cycles: []Cycle{
				{Token: 20, Acquired: at(0), Released: at(1)},
				{Token: 22, Acquired: at(3), Released: at(4)},
				{Token: 23, Acquired: at(4.2), Released: at(5)},
			},
			want: []time.Duration{200 * time.Microsecond},
		},
		{
			// No tokens (etcd Mutex): the time line of Acquired orders holders.
			name: "time_line_without_tokens",
			cycles: []Cycle{
				{Acquired: at(10), Released: at(11)},
				{Acquired: at(0), Released: at(2)},
				{Acquired: at(1.9), Released: at(9)},
			},
			want: []time.Duration{-100 * time.Microsecond, time.Millisecond},
		},
		{name: "one_cycle", cycles: []Cycle{{Token: 1, Acquired: at(0), Released: at(1)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, latencies(Match(tc.cycles)))
		})
	}
}

func TestSummarizeKeepsNegatives(t *testing.T) {
	var ds []time.Duration
	for i := -50; i < 50; i++ { // -50µs … 49µs
		ds = append(ds, time.Duration(i)*time.Microsecond)
	}
	s := Summarize(ds)
	require.Equal(t, int64(100), s.Count)
	require.Equal(t, -1.0, s.P50US)
	require.Equal(t, 48.0, s.P99US)
	require.Equal(t, 49.0, s.MaxUS)
	require.InDelta(t, -0.5, s.MeanUS, 1e-9)
	require.True(t, s.Ordered())
	require.Equal(t, -3000.0, Summarize([]time.Duration{-3 * time.Millisecond}).P50US)
	require.Zero(t, Summarize(nil))
}

func TestInWindow(t *testing.T) {
	hs := Match([]Cycle{
		{Token: 1, Acquired: at(0), Released: at(1)},
		{Token: 2, Acquired: at(2), Released: at(3)},
		{Token: 3, Acquired: at(4), Released: at(5)},
		{Token: 4, Acquired: at(6), Released: at(7)},
	})
	got := InWindow(hs, at(3), at(7))
	require.Len(t, got, 2)
	require.Equal(t, uint64(2), got[0].From.Token)
	require.Equal(t, uint64(3), got[1].From.Token)
}

// TestMeasure drives a real contended lock (a sync.Mutex handing out
// tokens) and checks that every handoff of the window is counted once and
// the result carries handoff figures.
func TestMeasure(t *testing.T) {
	var (
		mu    sync.Mutex
		token uint64
	)
	res, err := Measure(context.Background(), load.Config{Concurrency: 4, Duration: 100 * time.Millisecond, Warmup: 20 * time.Millisecond},
		func(ctx context.Context, w int) (Cycle, error) {
			mu.Lock()
			token++
			c := Cycle{Token: token, Acquired: time.Now()}
			time.Sleep(100 * time.Microsecond)
			c.Released = time.Now()
			mu.Unlock()
			return c, nil
		})
	require.NoError(t, err)
	require.Positive(t, res.Ops)
	require.Equal(t, float64(res.Ops)/res.WindowSec, res.PerSec)
	require.Equal(t, res.Ops, res.Latency.Count)
	require.Less(t, res.Ops, int64(token), "warm-up handoffs are left out")
}
