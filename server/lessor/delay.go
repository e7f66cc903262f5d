package lessor

import (
	"sort"
	"time"
)

// Delay records that a lock on key ended by an Expire that applied locally
// just now and asked for a lock-delay of lockDelayMS milliseconds (Chubby
// §2.4, Consul session lock-delay): the key is not to be granted again until
// now + lockDelayMS on this node's clock. Every node records it at its own
// apply, so a new leader keeps the delay (issue 15). When it ends,
// Config.OnDelayEnd(key) is called. A zero or negative delay does nothing.
// Does not block.
func (l *Lessor) Delay(key string, lockDelayMS int64) {
	if lockDelayMS <= 0 {
		return
	}
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.delays[key] = now.Add(ms(lockDelayMS))
	l.kick()
}

// Delayed returns how long key stays ungrantable because of a lock-delay on
// this node's clock (0: none, or it has passed).
func (l *Lessor) Delayed(key string) time.Duration {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	end, ok := l.delays[key]
	if !ok || !now.Before(end) {
		return 0
	}
	return end.Sub(now)
}

// Delays returns how many lock-delays this node is timing.
func (l *Lessor) Delays() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.delays)
}

// endDelays forgets every delay ended by now, returns their keys, and sets
// *next to the earliest delay end still ahead (left alone when none); l.mu held.
func (l *Lessor) endDelays(now time.Time, next *time.Time) []string {
	var ended []string
	for key, end := range l.delays {
		if !now.Before(end) {
			delete(l.delays, key)
			ended = append(ended, key)
			continue
		}
		if next.IsZero() || end.Before(*next) {
			*next = end
		}
	}
	sort.Strings(ended)
	return ended
}
