// Package progress prints ticketbench's progress line on stderr: which step of
// how many is running, what it measures, the time spent and an estimate of
// the time left (elapsed ÷ steps done × steps left). On a terminal the line is
// rewritten in place; otherwise each update is a line of its own, so logs of a
// `make bench` in CI stay readable.
//
// # Usage
//
//  1. New(w, totalSteps); w is usually os.Stderr.
//  2. Step("round 1/3 · commit · etcd · 64 clients") when a step begins;
//     Note(text) for an extra line that does not count as a step.
//  3. Done() at the end ends the line.
//
// Example:
//
//	p := progress.New(os.Stderr, 12)
//	p.Step("round 1/3 · floor")
//	p.Done()
package progress
