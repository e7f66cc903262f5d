package raftstore

import (
	"fmt"
	"sync"

	"github.com/ticketd/ticketd/backends/internal/badgerlog"
)

// compactor deletes entries at or below the compaction point in the
// background, badgerlog.CompactChunk at a time (then runs badger's value-log
// garbage collection), after CreateSnapshot has
// durably moved the compaction point (in one write, ~8k deletions
// stalled the raft loop and every append queued behind it). The keys it
// deletes are never read nor written again by the Store (every reader and
// writer stays above the compaction point), so it needs no Store lock. A
// crash before it is done leaves keys at or below the compaction point,
// which Open drops.
type compactor struct {
	mu      sync.Mutex
	idle    *sync.Cond // broadcast when running turns false
	from    uint64     // keys (from, to] are still to delete
	to      uint64
	running bool
	stopped bool
	err     error // the first failed deletion, reported by CreateSnapshot
	wg      sync.WaitGroup
}

// add schedules the deletion of the entries (from, to] and starts the
// background goroutine when it is not running. Ranges added one after the
// other are contiguous or overlap (each starts at the previous compaction
// point), so one range covers them.
func (c *compactor) add(s *Store, from, to uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || to <= from {
		return
	}
	if c.idle == nil {
		c.idle = sync.NewCond(&c.mu)
	}
	if c.running {
		c.to = max(c.to, to)
		return
	}
	c.from, c.to, c.running = from, to, true
	c.wg.Add(1)
	go c.run(s)
}

func (c *compactor) run(s *Store) {
	defer c.wg.Done()
	for {
		c.mu.Lock()
		if c.stopped || c.err != nil {
			c.finish()
			return
		}
		if c.from >= c.to {
			// Caught up: reclaim what badger's value log holds of deleted
			// or overwritten values (badgerlog.ReclaimValueLog), once per
			// time the deletions catch up.
			c.mu.Unlock()
			err := badgerlog.ReclaimValueLog(s.db)
			c.mu.Lock()
			if err != nil && c.err == nil {
				c.err = fmt.Errorf("raftstore: value log garbage collection: %w", err)
			}
			if c.stopped || c.err != nil || c.from >= c.to {
				c.finish()
				return
			}
			c.mu.Unlock()
			continue
		}
		lo, hi := c.from+1, min(c.to, c.from+badgerlog.CompactChunk)
		c.mu.Unlock()
		err := badgerlog.DeleteIndexes(s.db, prefixEntry, lo, hi)
		c.mu.Lock()
		if err != nil {
			c.err = fmt.Errorf("raftstore: delete compacted entries [%d,%d]: %w", lo, hi, err)
		}
		c.from = hi
		c.mu.Unlock()
	}
}

// finish marks the goroutine stopped and wakes wait; c.mu is held and
// released.
func (c *compactor) finish() {
	c.running = false
	c.idle.Broadcast()
	c.mu.Unlock()
}

// failed returns the first failed background deletion, if any.
func (c *compactor) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// wait returns when no deletion is running, with failed's error.
func (c *compactor) wait() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.running {
		c.idle.Wait()
	}
	return c.err
}

// stop ends the background deletion after its current chunk and waits for
// it; what is left Open drops on the next start. Later adds do nothing.
func (c *compactor) stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.wg.Wait()
}
