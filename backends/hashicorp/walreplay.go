package hashicorp

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// This file keeps, for a restarted node on the raft-wal store, the entries
// that openWALStore's full read of the log (verify) decoded, until they
// are applied, so that hashicorp/raft's two reads of the log after the
// restored snapshot — NewRaft's scan for configuration entries, then the
// apply once the leader's commit index arrives — come from memory instead
// of from raft-wal twice more. raft-wal copies at least 64 KiB of its
// segment file for every entry it returns (its read buffer), whatever the
// entry's size, and the retained log grows with the table (up to one
// snapshot's worth of entry data, backends.SnapshotDue), so every pass
// costs a 64 KiB copy per entry (docs/benchmarks.md, a million locks:
// the one pass left is still about half of a restart's CPU). The etcd
// backend keeps its whole retained log in memory for good (etcd's
// MemoryStorage); this keeps the part a restart still has to apply, and
// only until it is applied.

// replayCache holds decoded entries from the full read at open, each until
// the state machine has applied it (dropApplied) or the log changed at its
// index (drop). Safe for concurrent use; the zero value holds nothing.
type replayCache struct {
	mu   sync.Mutex
	from uint64     // index of logs[0]
	logs []raft.Log // logs[i] is entry from+i; Index 0 once dropped
	held int        // entries of logs not dropped
	// active is held > 0, read without c.mu: once the restart's entries
	// are applied, a read costs one atomic load more than raft-wal's.
	active atomic.Bool
	// served counts the reads answered from memory (Served).
	served atomic.Uint64
}

// fill makes logs, the entries from index from on, what c holds (c held
// nothing before: verify fills it once, at open).
func (c *replayCache) fill(from uint64, logs []raft.Log) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.from, c.logs, c.held = from, logs, len(logs)
	c.active.Store(len(logs) > 0)
}

// get copies the entry at index into l if it is held.
func (c *replayCache) get(index uint64, l *raft.Log) bool {
	if !c.active.Load() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if index < c.from || index-c.from >= uint64(len(c.logs)) || c.logs[index-c.from].Index == 0 {
		return false
	}
	*l = c.logs[index-c.from]
	c.served.Add(1)
	return true
}

// drop forgets the entries from index from to index to, both included:
// the log is being changed there (appended over, or deleted), or they are
// applied. A prefix or a suffix is cut off the array, so that forgetting
// entries in log order costs what is forgotten.
func (c *replayCache) drop(from, to uint64) {
	if !c.active.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.logs) == 0 || to < c.from || from >= c.from+uint64(len(c.logs)) {
		return
	}
	lo := max(from, c.from) - c.from
	hi := min(to-c.from+1, uint64(len(c.logs))) // exclusive
	for i := lo; i < hi; i++ {
		if c.logs[i].Index != 0 {
			c.logs[i] = raft.Log{}
			c.held--
		}
	}
	switch {
	case c.held == 0:
		c.from, c.logs = 0, nil
		c.active.Store(false)
	case lo == 0:
		c.logs, c.from = c.logs[hi:], c.from+hi
	case hi == uint64(len(c.logs)):
		c.logs = c.logs[:lo]
	}
}

// dropApplied forgets the entries up to index, which the state machine has
// applied (or a restored snapshot covers): a restart reads them no more.
func (c *replayCache) dropApplied(index uint64) { c.drop(0, index) }

// Served returns how many reads were answered from memory.
func (c *replayCache) Served() uint64 { return c.served.Load() }
