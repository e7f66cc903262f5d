// Package fakeclock is a hand-driven lessor.Clock for deterministic tests:
// time moves only when the test calls Advance, and every timer due by then
// fires during that call. No test that uses it sleeps.
//
// # Usage
//
//  1. c := fakeclock.New() and pass c wherever a lessor.Clock is taken.
//  2. Call c.Advance(d) to move time; every timer due by then fires.
//  3. Use c.WaitTimers(n) to wait (bounded) until n timers are armed, so a
//     test knows a goroutine reached its sleep before advancing.
//
// Example:
//
//	c := fakeclock.New()
//	l, _ := lessor.New(lessor.Config{Clock: c, ...})
//	c.Advance(2 * time.Second)
package fakeclock
