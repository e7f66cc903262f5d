// Package load drives a benchmark workload: many workers calling one operation
// for a fixed window, in one of two modes, and reduces what they saw to
// throughput and latency percentiles (package latency).
//
//   - Closed loop (ModeClosed): each of Concurrency workers calls the operation
//     again as soon as the previous call returns. Latency is measured from the
//     call to its return. This is what a fixed pool of synchronous clients sees,
//     but it suffers from coordinated omission: a stall delays the requests that
//     would have been sent during it, so they never record the stall.
//   - Open loop (ModeOpen): operations are scheduled at a fixed Rate (one every
//     1/Rate seconds) independently of how fast they complete, and up to
//     Concurrency run at once. Latency is measured from the intended send time,
//     so a stall shows in the latency of every operation scheduled during it
//     (Gil Tene's correction, as in wrk2).
//
// Operations that start during the Warmup are run but not recorded; the
// measured window is Duration long. Throughput is the number of successful
// operations started (closed loop) or scheduled (open loop) in the window,
// divided by the window's length — in open loop, by the time until the last
// of them completed, so a system that cannot keep up with Rate shows the
// throughput it achieved, not the rate it was offered.
//
// # Usage
//
//  1. Write an Op. Calls for one worker index never overlap, so per-worker state
//     kept in a slice indexed by worker needs no lock.
//  2. Call Run with a Config; it returns when the window has passed and every
//     started operation has returned.
//  3. Read Result: Ops, Errors, PerSec and Latency.
//
// Example:
//
//	res, err := load.Run(ctx, load.Config{Concurrency: 16, Duration: time.Second},
//		func(ctx context.Context, worker int) error { return propose(ctx, worker) })
//	fmt.Println(res.PerSec, res.Latency.P99US)
package load
