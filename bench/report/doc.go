// Package report holds the figures of one ticketbench run and turns them into
// what a reader sees: the medians over rounds, the ratios the aims are set in
// (etcd/hashicorp per concurrency, commit p50 ÷ physical floor, lock
// throughput ÷ etcd's Mutex), whether the aims held, a plain-text table and a
// Markdown summary. Every derived figure names how many rounds and operations
// it comes from, and nothing is estimated: a figure that was not measured is
// absent, never filled in.
//
// # Usage
//
//  1. Fill a Report: Machine, Settings, one Floor per round and one
//     Measurement per (round, workload, system, concurrency).
//  2. Call Summarize; it sets Report.Summary from the raw figures.
//  3. Write it with WriteJSON, WriteTable and WriteMarkdown (or Write for all
//     three files in a directory).
//
// Example:
//
//	r := report.Report{Settings: s, Floors: floors, Measurements: ms}
//	r.Summarize()
//	r.WriteTable(os.Stdout)
//	err := r.Write(outDir) // report.json, summary.md
package report
