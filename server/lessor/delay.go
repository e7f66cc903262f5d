package lessor

import (
	"container/heap"
	"sort"
	"time"
)

// Delay records that a lock on key ended by an Expire that applied locally
// just now and asked for a lock-delay of lockDelayMS milliseconds (Chubby
// §2.4, Consul session lock-delay): the key is not to be granted again until
// now + lockDelayMS on this node's clock. Every node records it at its own
// apply, so a new leader keeps the delay (docs/design.md#lock-delay). When it ends,
// Config.OnDelayEnd(key) is called. A zero or negative delay does nothing.
// Does not block.
func (l *Lessor) Delay(key string, lockDelayMS int64) {
	if lockDelayMS <= 0 {
		return
	}
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setDelay(key, now.Add(ms(lockDelayMS)))
	l.kick()
}

// Delayed returns how long key stays ungrantable because of a lock-delay on
// this node's clock (0: none, or it has passed).
func (l *Lessor) Delayed(key string) time.Duration {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	d, ok := l.delays[key]
	if !ok || !now.Before(d.end) {
		return 0
	}
	return d.end.Sub(now)
}

// Delays returns how many lock-delays this node is timing.
func (l *Lessor) Delays() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.delays)
}

// delay is one lock-delay being timed: key stays ungrantable until end.
type delay struct {
	key   string
	end   time.Time
	index int // position in the end heap
}

// setDelay times a lock-delay of key ending at end, replacing any earlier
// one of key; l.mu held. O(log delays).
func (l *Lessor) setDelay(key string, end time.Time) {
	if d, ok := l.delays[key]; ok {
		d.end = end
		heap.Fix(&l.ends, d.index)
		return
	}
	d := &delay{key: key, end: end}
	l.delays[key] = d
	heap.Push(&l.ends, d)
}

// clearDelay forgets the lock-delay of key, if any (a grant of key ended
// it); l.mu held. O(log delays).
func (l *Lessor) clearDelay(key string) {
	if d, ok := l.delays[key]; ok {
		delete(l.delays, key)
		heap.Remove(&l.ends, d.index)
	}
}

// endDelays forgets every delay ended by now, returns their keys in key
// order, and sets *next to the earliest delay end still ahead (left alone
// when none); l.mu held. It pops only the ended delays off the end heap:
// O(ended · log delays), not a scan of every delay on every wake.
func (l *Lessor) endDelays(now time.Time, next *time.Time) []string {
	var ended []string
	for len(l.ends) > 0 && !now.Before(l.ends[0].end) {
		d := heap.Pop(&l.ends).(*delay)
		delete(l.delays, d.key)
		ended = append(ended, d.key)
	}
	if len(l.ends) > 0 && (next.IsZero() || l.ends[0].end.Before(*next)) {
		*next = l.ends[0].end
	}
	sort.Strings(ended)
	return ended
}

// delayHeap is a min-heap of lock-delays by end time (container/heap).
type delayHeap []*delay

func (h delayHeap) Len() int           { return len(h) }
func (h delayHeap) Less(i, j int) bool { return h[i].end.Before(h[j].end) }
func (h delayHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *delayHeap) Push(x any) {
	d := x.(*delay)
	d.index = len(*h)
	*h = append(*h, d)
}
func (h *delayHeap) Pop() any {
	old := *h
	n := len(old)
	d := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return d
}
