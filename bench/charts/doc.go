// Package charts draws ticketbench's PNG plots from a report.Summary with
// gonum/plot: for each workload (commit, lock), latency percentiles (p50 solid,
// p99 dashed, log scale) against concurrency, and throughput against
// concurrency. Both axes of the latency plot and the x axis of the throughput
// plot use a log scale with ticks at the measured client counts, since those
// grow geometrically (1, 16, 64, 256).
//
// # Usage
//
//  1. Summarize the report (report.Report.Summarize).
//  2. Call Write with the output directory; it returns the files it wrote.
//  3. A workload with no measured rows gets no plots.
//
// Example:
//
//	files, err := charts.Write(outDir, r.Summary)
//	// files: commit-latency.png, commit-throughput.png, lock-latency.png, lock-throughput.png
package charts
