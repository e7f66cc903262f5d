// Package waitq is the leader's per-key gate and FIFO wait queue for lock
// grants (docs/design.md#waiting-and-fairness).
//
// The leader proposes a grant only when it fits beside the key's holders and
// the grants already in flight, which count as holders of their mode
// (docs/design.md#waiting-and-fairness): an exclusive lock takes one holder, a shared lock any number of
// shared holders and none beside an exclusive one, a semaphore up to its
// limit. Acquire requests with wait=true queue per key, first in first out
// across modes (writer preference: a waiting exclusive request holds back
// every shared request behind it), and as soon as a Release or Expire of
// that key applies the queue hands turns from its head for as long as they
// fit: several shared waiters at once, a semaphore's freed slot to the next
// waiter. A request whose limit differs from the key's fails at once
// (ErrLimitMismatch). A request without wait is refused
// (ErrHeld) only on what the lock table shows: when only grants in flight
// or the queue stand in the way, it waits as a tentative waiter until the
// table shows the key held incompatibly by another owner or its turn comes,
// so that every refusal is linearizable. A waiter whose client gives up
// leaves the queue. On leadership loss every waiter fails with ErrClosed,
// which the API turns into Unavailable plus the new leader, and clients
// re-queue there (etcd's concurrency.Mutex waits the same way, by revision order).
//
// # Usage
//
// The server owns one Queue and must, as the caller:
//
//  1. Build it with New(Config{State: ...}), State reporting the lock table's
//     holders of a key (mode, limit, and whether each is being removed) and
//     whether the key is under a lock-delay.
//  2. Open it when the node becomes the promoted leader; Close it on demotion.
//  3. For each Acquire on the leader, call Enter with its Request (key,
//     owner, mode, limit, wait); with the Turn, propose the grant; when the
//     proposal resolves, record any removal it started (a ghost release),
//     then call Turn.Done.
//  4. From the apply hook, call Kick(key) after every applied Release or
//     Expire of key.
//  5. Optionally (pipelined handoff, docs/design.md#handoff), call Handoff(key) just before
//     proposing a Release of key's holder (one without a lock-delay; it does
//     nothing for shared keys and semaphores, whose Release is two-step): the head
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
//	turn, err := q.Enter(ctx, waitq.Request{Key: "jobs/nightly", Owner: owner, Mode: core.ModeShared, Wait: true})
//	if err != nil {
//		return err // ErrHeld, ErrFull, ErrLimitMismatch, ErrClosed or ctx.Err()
//	}
//	res, err := node.Propose(ctx, core.Grant("jobs/nightly", 30000, owner).WithMode(core.ModeShared))
//	turn.Done()
package waitq
