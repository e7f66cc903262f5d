// Package latency records operation latencies in an HdrHistogram and reduces
// them to the percentiles ticketbench reports (p50, p90, p99, p99.9, max).
//
// A Histogram is not safe for concurrent use: give each worker goroutine its
// own, then Merge them into one when the workers are done. This keeps the hot
// path of a benchmark free of locks, as HdrHistogram's own recorders do.
//
// # Usage
//
//  1. Make one Histogram per worker with New.
//  2. Record each operation's latency with Record (values outside
//     [MinTrackable, MaxTrackable] are clamped, never dropped, so the count is exact).
//  3. Merge the workers' histograms into one and call Summarize.
//
// Example:
//
//	h := latency.New()
//	start := time.Now()
//	doWork()
//	h.Record(time.Since(start))
//	s := h.Summarize() // s.Count == 1, s.P50US ≈ the work's duration in µs
package latency
