package latency

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// The tracked range: 1 µs to 60 s with three significant digits, so every
// reported percentile is within 0.1% of the recorded value.
const (
	// MinTrackable is the smallest latency told apart from zero.
	MinTrackable = time.Microsecond
	// MaxTrackable is the largest latency recorded as itself; longer ones are
	// recorded as MaxTrackable.
	MaxTrackable = time.Minute
	// sigFigures is HdrHistogram's number of significant decimal digits.
	sigFigures = 3
)

// Histogram counts latencies in microsecond units. The zero value is not
// usable: make one with New. Not safe for concurrent use.
type Histogram struct {
	h *hdrhistogram.Histogram
}

// New returns an empty Histogram covering [MinTrackable, MaxTrackable].
func New() *Histogram {
	return &Histogram{h: hdrhistogram.New(1, int64(MaxTrackable/time.Microsecond), sigFigures)}
}

// Record adds one latency d. Values below MinTrackable count as MinTrackable
// and values above MaxTrackable as MaxTrackable, so the count stays exact.
func (h *Histogram) Record(d time.Duration) {
	us := int64(d / time.Microsecond)
	if us < 1 {
		us = 1
	}
	if max := int64(MaxTrackable / time.Microsecond); us > max {
		us = max
	}
	// The value is clamped to the tracked range, so RecordValue cannot fail.
	_ = h.h.RecordValue(us)
}

// Merge adds every value recorded in other to h. other is unchanged.
func (h *Histogram) Merge(other *Histogram) {
	// Both cover the same range, so nothing can be dropped.
	_ = h.h.Merge(other.h)
}

// Count is the number of recorded latencies.
func (h *Histogram) Count() int64 { return h.h.TotalCount() }

// Summarize returns the count, mean, max and percentiles of what was recorded.
// An empty Histogram gives a zero Summary.
func (h *Histogram) Summarize() Summary {
	if h.h.TotalCount() == 0 {
		return Summary{}
	}
	return Summary{
		Count:  h.h.TotalCount(),
		MeanUS: h.h.Mean(),
		P50US:  float64(h.h.ValueAtPercentile(50)),
		P90US:  float64(h.h.ValueAtPercentile(90)),
		P99US:  float64(h.h.ValueAtPercentile(99)),
		P999US: float64(h.h.ValueAtPercentile(99.9)),
		MaxUS:  float64(h.h.Max()),
	}
}

// Summary is a latency distribution reduced to the figures ticketbench
// reports. Every latency is in microseconds. The JSON names are those of the
// report file.
type Summary struct {
	// Count is the number of latencies the figures come from.
	Count int64 `json:"count"`
	// MeanUS is the arithmetic mean.
	MeanUS float64 `json:"mean_us"`
	// P50US, P90US, P99US and P999US are the 50th, 90th, 99th and 99.9th
	// percentiles (HdrHistogram's highest equivalent value at that rank).
	P50US  float64 `json:"p50_us"`
	P90US  float64 `json:"p90_us"`
	P99US  float64 `json:"p99_us"`
	P999US float64 `json:"p999_us"`
	// MaxUS is the largest recorded latency.
	MaxUS float64 `json:"max_us"`
}

// Ordered reports whether the percentiles are non-decreasing
// (p50 ≤ p90 ≤ p99 ≤ p99.9 ≤ max), as they must be for real data.
func (s Summary) Ordered() bool {
	return s.P50US <= s.P90US && s.P90US <= s.P99US && s.P99US <= s.P999US && s.P999US <= s.MaxUS
}
