// Package handoff measures how fast one contended lock passes from holder to
// holder: N clients on one key, each in a loop of Acquire-with-wait then
// Release (the contended handoff workload, docs/design.md#handoff; etcd's concurrency.Mutex on
// one shared prefix is the peer, in bench/etcdpeer).
//
// A handoff is the step from one holder to the next. Its latency is the time
// from the holder's Release returning to its client to the next holder's
// Acquire returning to its client. That can be negative: the service may
// grant the next waiter (and its reply may arrive) before the releasing
// client has read its own Release reply, and a negative value is recorded as
// such, not clamped. Holders are put in order by their fencing tokens when
// the system gives them (ticketd), and only consecutive tokens are paired, so
// a cycle missing from the record (a failed Release) never makes a false
// handoff; without tokens (etcd's Mutex) by the time each Acquire returned,
// which orders holders of one exclusive lock just as well: the next grant
// happens only after the previous holder's Release was sent, which is after
// its Acquire returned.
//
// # Usage
//
//  1. Write a CycleFunc that acquires the one key (waiting), notes the time
//     its Acquire returned and the token, releases, and notes that time.
//  2. Call Measure with a load.Config (Concurrency = N): it drives the
//     cycles with load.Run and returns a load.Result whose PerSec is
//     handoffs/s in the window and whose Latency is the (signed) handoff
//     latency distribution.
//
// Example:
//
//	res, err := handoff.Measure(ctx, load.Config{Concurrency: 8, Duration: time.Second},
//		func(ctx context.Context, w int) (handoff.Cycle, error) { ... })
package handoff
