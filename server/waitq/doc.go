// Package waitq is the leader's per-key gate and FIFO wait queue for lock
// grants (DESIGN.md, "Waiting and fairness").
//
// The leader never proposes a grant for a key it knows is held by someone
// else or that already has a grant in flight; Acquire requests with wait=true
// queue per key, first in first out, and the head is served as soon as a
// Release or Expire of that key applies. A request without wait is refused
// (ErrHeld) only on what the lock table shows: when only a grant in flight
// or the queue stands in the way, it waits as a tentative waiter until the
// table shows the key held by another owner or its turn comes, so that every
// refusal is linearizable. A waiter whose client gives up
// leaves the queue. On leadership loss every waiter fails with ErrClosed,
// which the API turns into Unavailable plus the new leader, and clients
// re-queue there (etcd's concurrency.Mutex waits the same way, by revision order).
//
// # Usage
//
// The server owns one Queue and must, as the caller:
//
//  1. Build it with New(Config{State: ...}), State reporting the lock table's
//     holder of a key and whether that holder is being removed.
//  2. Open it when the node becomes the promoted leader; Close it on demotion.
//  3. For each Acquire on the leader, call Enter; with the Turn, propose the
//     grant; when the proposal resolves, record any removal it started (a
//     ghost release), then call Turn.Done.
//  4. From the apply hook, call Kick(key) after every applied Release or
//     Expire of key.
//  5. Optionally (issue 21, pipelined handoff), call Handoff(key) just before
//     proposing a Release of key's holder (one without a lock-delay): the head
//     waiter gets a Pipelined turn at once and its grant follows the Release
//     in the log, so a handoff costs one commit. If that grant is rejected
//     (the key was still held when it applied), call Turn.Requeue instead of
//     Turn.Done and Turn.Wait for the next turn: the waiter keeps its place
//     at the head.
//
// Keys are sharded by hash, each shard with its own mutex, so requests for
// different keys do not contend; Waiting and Inflight take no lock.
//
// Example:
//
//	turn, err := q.Enter(ctx, "jobs/nightly", owner, true)
//	if err != nil {
//		return err // ErrHeld, ErrFull, ErrClosed or ctx.Err()
//	}
//	res, err := node.Propose(ctx, core.Grant("jobs/nightly", 30000, owner))
//	turn.Done()
package waitq
