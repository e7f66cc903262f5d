package etcd

import (
	"sync"

	"github.com/ticketd/ticketd/core"
)

// notifier delivers leader events to Config.OnLeaderChange in order from one
// goroutine, so a slow callback never blocks the raft loop (the queue is
// unbounded, but leader changes are rare).
type notifier struct {
	fn    func(core.LeaderEvent)
	mu    sync.Mutex
	queue []core.LeaderEvent
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}
}

func newNotifier(fn func(core.LeaderEvent)) *notifier {
	n := &notifier{fn: fn, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go n.run()
	return n
}

// push queues ev without blocking.
func (n *notifier) push(ev core.LeaderEvent) {
	if n.fn == nil {
		return
	}
	n.mu.Lock()
	n.queue = append(n.queue, ev)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) run() {
	defer close(n.done)
	for {
		select {
		case <-n.wake:
		case <-n.stop:
			return
		}
		for {
			n.mu.Lock()
			q := n.queue
			n.queue = nil
			n.mu.Unlock()
			if len(q) == 0 {
				break
			}
			for _, ev := range q {
				n.fn(ev)
			}
		}
	}
}

// close stops delivery (queued events are dropped) and waits for the goroutine.
func (n *notifier) close() {
	close(n.stop)
	<-n.done
}
