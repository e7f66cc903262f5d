package latency_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/latency"
)

func TestSummarize(t *testing.T) {
	h := latency.New()
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	s := h.Summarize()
	require.EqualValues(t, 1000, s.Count)
	require.InDelta(t, 500, s.P50US, 1)
	require.InDelta(t, 900, s.P90US, 1)
	require.InDelta(t, 990, s.P99US, 1)
	require.InDelta(t, 999, s.P999US, 1)
	require.InDelta(t, 1000, s.MaxUS, 1)
	require.InDelta(t, 500.5, s.MeanUS, 1)
	require.True(t, s.Ordered())
}

func TestRecordClampsOutOfRange(t *testing.T) {
	h := latency.New()
	h.Record(0)
	h.Record(2 * latency.MaxTrackable)
	s := h.Summarize()
	require.EqualValues(t, 2, s.Count)
	require.InDelta(t, 1, s.P50US, 0.5)
	require.InEpsilon(t, float64(latency.MaxTrackable/time.Microsecond), s.MaxUS, 0.001)
}

func TestMerge(t *testing.T) {
	a, b := latency.New(), latency.New()
	a.Record(100 * time.Microsecond)
	b.Record(300 * time.Microsecond)
	b.Record(300 * time.Microsecond)
	a.Merge(b)
	require.EqualValues(t, 3, a.Count())
	require.EqualValues(t, 2, b.Count())
	require.InDelta(t, 300, a.Summarize().P50US, 1)
}

func TestEmpty(t *testing.T) {
	require.Equal(t, latency.Summary{}, latency.New().Summarize())
}

func TestOrdered(t *testing.T) {
	tests := []struct {
		name string
		s    latency.Summary
		want bool
	}{
		{"ordered", latency.Summary{P50US: 1, P90US: 2, P99US: 3, P999US: 4, MaxUS: 5}, true},
		{"all_equal", latency.Summary{P50US: 1, P90US: 1, P99US: 1, P999US: 1, MaxUS: 1}, true},
		{"p99_below_p50", latency.Summary{P50US: 5, P90US: 5, P99US: 4, P999US: 6, MaxUS: 7}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.s.Ordered())
		})
	}
}
