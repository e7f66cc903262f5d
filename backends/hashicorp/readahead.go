package hashicorp

import (
	"sync"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/backends/internal/badgerlog"
)

// This file is the badger log store's read-ahead: hashicorp/raft reads the
// log one GetLog at a time, and a restarted node reads every entry after its
// snapshot in order twice (NewRaft's scan for configuration entries, then
// the apply of the same entries once the leader's commit index is known).
// Each badger Get seeks every level of the LSM tree; one iterator over the
// next entries costs one seek. The retained log is up to a snapshot's worth
// of entries (backends.SnapshotDue), so without it a restart's reads grow
// with the lock table.

// Bounds of one read-ahead window.
const (
	// readAheadEntries is how many entries one window holds at most.
	readAheadEntries = 512
	// readAheadBytes bounds the encoded size of a window's entries (a
	// group-committed entry may hold many commands).
	readAheadBytes = 4 << 20
)

// readAhead is the window of decoded entries the last sequential GetLog
// fetched, and what tells a sequential read from another. Safe for
// concurrent use; writers call invalidate after every change to the log.
type readAhead struct {
	mu sync.Mutex
	// gen counts invalidations: a window read while it moved is dropped,
	// since the write may have changed an entry the read saw.
	gen uint64
	// from is the index of logs[0].
	from uint64
	logs []raft.Log
	// next is the index after the last one asked for: a GetLog of it is
	// sequential.
	next uint64
	// fills counts the windows read.
	fills uint64
}

// get copies the entry at index into l when the window holds it (ok).
// Otherwise it says whether the read is sequential (the one after the
// last asked for) and returns the generation a window read now must
// still match when it is installed.
func (r *readAhead) get(index uint64, l *raft.Log) (ok, sequential bool, gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sequential = index != 0 && index == r.next
	r.next = index + 1
	if index >= r.from && index-r.from < uint64(len(r.logs)) {
		*l = r.logs[index-r.from]
		return true, sequential, r.gen
	}
	return false, sequential, r.gen
}

// install keeps logs (entries from, from+1, …) as the window, unless an
// invalidation happened since gen was read.
func (r *readAhead) install(gen, from uint64, logs []raft.Log) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fills++
	if gen == r.gen {
		r.from, r.logs = from, logs
	}
}

// invalidate drops the window: the log changed (entries stored,
// overwritten or deleted).
func (r *readAhead) invalidate() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	r.from, r.logs = 0, nil
}

// readWindow reads the entries index, index+1, … stored in txn, up to
// readAheadEntries or readAheadBytes, stopping before a gap. Each is decoded
// and checked as GetLog does (decodeLog): a damaged entry at index is
// returned as its error, one later ends the window before it, so that it
// is reported when it is asked for. badger.ErrKeyNotFound: no entry at
// index.
func readWindow(txn *badger.Txn, index uint64) ([]raft.Log, error) {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = logPrefix
	opts.PrefetchSize = 64
	it := txn.NewIterator(opts)
	defer it.Close()
	var (
		out  []raft.Log
		size int
	)
	want := index
	for it.Seek(badgerlog.IndexKey(logPrefix, index)); it.Valid() && len(out) < readAheadEntries && size < readAheadBytes; it.Next() {
		item := it.Item()
		got, err := badgerlog.ParseIndexKey(logPrefix, item.Key())
		if err != nil || got != want {
			break // a gap, or a key GetLog would not find either
		}
		var l raft.Log
		if err := item.Value(func(v []byte) error { size += len(v); return decodeLog(want, v, &l) }); err != nil {
			if len(out) == 0 {
				return nil, err
			}
			break
		}
		out = append(out, l)
		want++
	}
	if len(out) == 0 {
		return nil, badger.ErrKeyNotFound
	}
	return out, nil
}
