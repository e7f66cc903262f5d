package hashicorp

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// This file awaits the futures of the log entries Submit hands to the
// library on one goroutine per node instead of one per entry.
//
// hashicorp/raft's futures cannot be selected on: a caller that must also
// honour its ctx and Close needs some goroutine to block in Error() for it
// (request.go). The library resolves log futures in the order they were
// queued: the leader answers committed entries after the FSM applied them
// in log order; on losing leadership it answers the appended ones with
// ErrLeadershipLost, and the follower and candidate loops answer the ones
// still queued with ErrNotLeader (raft.go runFollower, runCandidate). So
// one goroutine awaiting them in queue order finds, once the first of a
// batch resolves, the rest of the batch resolved already, and passes each
// result on without sleeping again: per batch one goroutine wake-up, where
// a goroutine per entry cost a goroutine start and a wake-up per entry
// (docs/benchmarks.md#the-hashicorp-adapters-futures-and-enqueue).
//
// The order is only what makes this cheap, never what makes it correct:
// an entry queued here ahead of one the library answers earlier delays
// that answer only until its own arrives, and every caller's await still
// returns at its ctx's end or at Close.

// applyWaiter is the queue of started log entries whose futures await
// their one goroutine, which runs while the queue is not empty and exits
// when it drains (so an idle node keeps no goroutine for it, and a busy
// one starts it once per burst).
type applyWaiter struct {
	mu      sync.Mutex
	queue   []*started
	running bool // a goroutine is draining the queue

	// unresolved counts the entries queued whose result is not passed on
	// yet (the queue and the batch being drained).
	unresolved atomic.Int64
}

// startApply is start (request.go) for a log entry: its future is awaited
// by the node's applyWaiter instead of a goroutine of its own.
func (n *Node) startApply(ctx context.Context, fn func(timeout time.Duration) raft.Future) (*started, error) {
	s, err := n.hand(ctx, fn)
	if err != nil {
		return nil, err
	}
	w := &n.applies
	w.unresolved.Add(1)
	w.mu.Lock()
	w.queue = append(w.queue, s)
	if w.running {
		w.mu.Unlock()
		return s, nil
	}
	w.running = true
	w.mu.Unlock()
	go n.awaitApplies()
	return s, nil
}

// awaitApplies passes each queued future's result to its started.done, in
// queue order, until the queue is empty. Each entry was counted in
// n.inflight by hand; it is done once its result is passed on.
func (n *Node) awaitApplies() {
	w := &n.applies
	var batch []*started // the array the queue had before, reused
	for {
		w.mu.Lock()
		if len(w.queue) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		batch, w.queue = w.queue, batch[:0]
		w.mu.Unlock()
		for i, s := range batch {
			s.done <- s.f.Error() // buffered for this one send
			batch[i] = nil
			w.unresolved.Add(-1)
			n.inflight.Done()
		}
	}
}
