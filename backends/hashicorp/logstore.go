package hashicorp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/backends/internal/badgerlog"
)

// This file is the Raft log and stable store on badger/v4 (Config.LogStore
// badger, the default).

// Key prefixes of the hashicorp backend in the node's badger database.
var (
	logPrefix    = []byte("hlog/")    // + 8-byte big-endian index → encoded raft.Log
	stablePrefix = []byte("hstable/") // + raft's stable key → value
)

// logStore is a raft.LogStore and raft.StableStore on badger/v4 (none is
// maintained for badger v4). Every write is one durable badger transaction
// (SyncWrites), split only when badger's transaction size limit forces it.
//
// Safe for concurrent use: hashicorp/raft writes from its main goroutine,
// compacts from its snapshot goroutine and reads from replication goroutines.
type logStore struct {
	db *badger.DB
	logHooks
	// wmu serialises writers so that first/last follow the database exactly.
	wmu sync.Mutex
	// first and last are the smallest and largest stored index (0, 0 when the
	// log is empty), cached so FirstIndex/LastIndex cost no I/O.
	first, last atomic.Uint64
	// ra serves sequential reads from one iterator (readahead.go).
	ra readAhead
}

var (
	_ raft.LogStore    = (*logStore)(nil)
	_ raft.StableStore = (*logStore)(nil)
)

// newLogStore loads the index bounds of the log stored in db.
func newLogStore(db *badger.DB) (*logStore, error) {
	s := &logStore{db: db}
	err := db.View(func(txn *badger.Txn) error {
		first, ok, err := badgerlog.FirstIndex(txn, logPrefix, 0)
		if err != nil || !ok {
			return err
		}
		last, _, err := badgerlog.LastIndex(txn, logPrefix, ^uint64(0))
		if err != nil {
			return err
		}
		s.first.Store(first)
		s.last.Store(last)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("badger: load log bounds: %w", err)
	}
	return s, nil
}

// Close closes the badger database (which flushes its memtable into a table).
func (s *logStore) Close() error { return s.db.Close() }

// replayed does nothing: the badger store keeps no entry for a restart's
// reads (its read-ahead window serves them, readahead.go).
func (s *logStore) replayed(uint64) {}

// FirstIndex returns the first stored index, 0 for an empty log.
func (s *logStore) FirstIndex() (uint64, error) { return s.first.Load(), nil }

// LastIndex returns the last stored index, 0 for an empty log.
func (s *logStore) LastIndex() (uint64, error) { return s.last.Load(), nil }

// GetLog reads the entry at index into l. It returns raft.ErrLogNotFound only
// when no entry is stored at index; any other failure is another error.
//
// A read of the entry after the one read last (raft's scans of the log at
// start, and a follower's apply) reads a window of the entries after it
// with one iterator and serves the next reads from it (readahead.go).
func (s *logStore) GetLog(index uint64, l *raft.Log) error {
	ok, sequential, gen := s.ra.get(index, l)
	if ok {
		return nil
	}
	err := s.db.View(func(txn *badger.Txn) error {
		if sequential {
			logs, err := readWindow(txn, index)
			if err != nil {
				return err
			}
			*l = logs[0]
			s.ra.install(gen, index, logs)
			return nil
		}
		item, err := txn.Get(badgerlog.IndexKey(logPrefix, index))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { return decodeLog(index, v, l) })
	})
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return raft.ErrLogNotFound
	case err != nil:
		return fmt.Errorf("badger: get log %d: %w", index, err)
	}
	return nil
}

// StoreLog stores one entry durably.
func (s *logStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores logs durably in one badger transaction (one WAL sync),
// overwriting entries at the same indexes. Indexes need not be contiguous with
// the stored log (raft may leave a gap after a snapshot install).
func (s *logStore) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	defer s.timed(len(logs), time.Now())
	var buf []byte
	defer s.ra.invalidate() // after the write: a window read before it is dropped
	err := badgerlog.Batch(s.db, len(logs), func(txn *badger.Txn, i int) error {
		start := len(buf)
		buf = encodeLog(buf, logs[i])
		// Full slice expression: a later append never writes into this value.
		return txn.Set(badgerlog.IndexKey(logPrefix, logs[i].Index), buf[start:len(buf):len(buf)])
	})
	if err != nil {
		return s.failed(fmt.Errorf("badger: store logs [%d,%d]: %w", logs[0].Index, logs[len(logs)-1].Index, err))
	}
	first, last := s.first.Load(), s.last.Load()
	for _, l := range logs {
		if first == 0 || l.Index < first {
			first = l.Index
		}
		last = max(last, l.Index)
	}
	s.first.Store(first)
	s.last.Store(last)
	return s.advance(last)
}

// DeleteRange deletes the entries from `from` to `to`, both inclusive,
// durably. Indexes in the range that hold no entry are ignored.
//
// A prefix that leaves the last entry in place (raft's compaction after a
// snapshot, called from its snapshot goroutine) is deleted in writes of
// badgerlog.CompactChunk entries, oldest first, releasing the writers' lock
// between them: an append waits for one small write, never for a
// snapshot's worth of deletions. A crash in the middle leaves a
// log that starts later but is still contiguous; FirstIndex moves with each
// chunk. Then badger's value log is garbage-collected
// (badgerlog.ReclaimValueLog).
func (s *logStore) DeleteRange(from, to uint64) error {
	for {
		s.wmu.Lock()
		first, last := s.first.Load(), s.last.Load()
		if first == 0 || from > first || to >= last || to < first {
			break // not a compaction of a prefix: one write below
		}
		hi := min(to, first+badgerlog.CompactChunk-1)
		err := s.deleteLocked(first, hi)
		s.wmu.Unlock()
		if err != nil {
			return err
		}
		if hi == to {
			// The compaction is done: reclaim what badger's value log
			// holds of deleted values (bounded; nothing to do when every
			// entry lived in the LSM tree).
			if err := badgerlog.ReclaimValueLog(s.db); err != nil {
				return fmt.Errorf("badger: value log garbage collection: %w", err)
			}
			return nil
		}
	}
	defer s.wmu.Unlock()
	return s.deleteLocked(from, to)
}

// deleteLocked deletes the entries [from, to] in one durable write (split
// only by badger's transaction limit) and moves the bounds; s.wmu is held.
func (s *logStore) deleteLocked(from, to uint64) error {
	first, last := s.first.Load(), s.last.Load()
	lo, hi := max(from, first), min(to, last)
	if first == 0 || lo > hi {
		return nil
	}
	if hi >= last && lo > 0 {
		// A suffix goes (a follower drops conflicting entries, or a snapshot
		// install drops the whole log): lower the watermark first, so a
		// crash during the deletion never leaves it past the log's end.
		if err := s.mark(lo - 1); err != nil {
			return err
		}
	}
	defer s.ra.invalidate() // after the deletion: a window read before it is dropped
	if err := badgerlog.DeleteIndexes(s.db, logPrefix, lo, hi); err != nil {
		return s.failed(fmt.Errorf("badger: delete logs [%d,%d]: %w", lo, hi, err))
	}
	// Recompute the bounds that the deletion may have moved: one seek each.
	err := s.db.View(func(txn *badger.Txn) error {
		if lo <= first {
			next, ok, err := badgerlog.FirstIndex(txn, logPrefix, hi+1)
			if err != nil {
				return err
			}
			if !ok {
				first, last = 0, 0
				return nil
			}
			first = next
		}
		if hi >= last {
			if lo == 0 {
				first, last = 0, 0
				return nil
			}
			prev, ok, err := badgerlog.LastIndex(txn, logPrefix, lo-1)
			if err != nil {
				return err
			}
			if !ok {
				first, last = 0, 0
				return nil
			}
			last = prev
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("badger: delete logs [%d,%d]: reload bounds: %w", lo, hi, err)
	}
	s.first.Store(first)
	s.last.Store(last)
	return nil
}

// Set stores val under key durably. A value already stored is not written
// again: hashicorp/raft's NewRaft rewrites the stored currentTerm, which on
// a full disk would fail (and panic) at every start. A failed write stops
// the node (stableFailed).
func (s *logStore) Set(key, val []byte) error {
	if cur, err := s.Get(key); err == nil && cur != nil && bytes.Equal(cur, val) {
		return nil
	}
	err := badgerlog.Batch(s.db, 1, func(txn *badger.Txn, _ int) error {
		return txn.Set(stableKey(key), append([]byte(nil), val...))
	})
	if err != nil {
		return s.stableFailed(fmt.Errorf("badger: set %q: %w", key, err))
	}
	return nil
}

// Get returns the value stored under key. A missing key gives a nil value and
// a nil error: hashicorp/raft's StableStore contract says "an empty byte slice
// if key was not found", and its callers treat only the exact error text "not
// found" as absence, so any error here would be fatal to them.
func (s *logStore) Get(key []byte) ([]byte, error) {
	var val []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(stableKey(key))
		if err != nil {
			return err
		}
		val, err = item.ValueCopy(nil)
		return err
	})
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("badger: get %q: %w", key, err)
	}
	return val, nil
}

// SetUint64 stores val under key as 8 big-endian bytes, durably, unless
// GetUint64 returns val already (a missing key reads as 0).
func (s *logStore) SetUint64(key []byte, val uint64) error {
	if cur, err := s.GetUint64(key); err == nil && cur == val {
		return nil
	}
	return s.Set(key, badgerlog.EncodeUint64(val))
}

// GetUint64 returns the value SetUint64 stored under key, 0 and a nil error
// for a missing key (as Get), and an error wrapping badgerlog.ErrCorrupt when
// the stored value is not 8 bytes.
func (s *logStore) GetUint64(key []byte) (uint64, error) {
	val, err := s.Get(key)
	if err != nil || val == nil {
		return 0, err
	}
	v, err := badgerlog.DecodeUint64(val)
	if err != nil {
		return 0, fmt.Errorf("badger: get %q: %w", key, err)
	}
	return v, nil
}

func stableKey(key []byte) []byte {
	return append(append(make([]byte, 0, len(stablePrefix)+len(key)), stablePrefix...), key...)
}

// logVersion is the first byte of every stored raft.Log value.
const logVersion byte = 1

// encodeLog appends the stored form of l (its Index is the key, not stored):
//
//	version byte, type byte, uvarint term, varint AppendedAt (Unix ns, 0 for
//	the zero time), uvarint len(Data), Data, uvarint len(Extensions), Extensions
func encodeLog(buf []byte, l *raft.Log) []byte {
	buf = append(buf, logVersion, byte(l.Type))
	buf = binary.AppendUvarint(buf, l.Term)
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	buf = binary.AppendVarint(buf, at)
	buf = binary.AppendUvarint(buf, uint64(len(l.Data)))
	buf = append(buf, l.Data...)
	buf = binary.AppendUvarint(buf, uint64(len(l.Extensions)))
	return append(buf, l.Extensions...)
}

// decodeLog parses v (written by encodeLog) into l, copying the byte fields
// (v is only valid inside the badger transaction).
func decodeLog(index uint64, v []byte, l *raft.Log) error {
	bad := func(what string) error {
		return fmt.Errorf("%w: log %d: %s", badgerlog.ErrCorrupt, index, what)
	}
	if len(v) < 2 {
		return bad("short value")
	}
	if v[0] != logVersion {
		return bad(fmt.Sprintf("unknown version %d", v[0]))
	}
	typ := raft.LogType(v[1])
	rest := v[2:]
	term, n := binary.Uvarint(rest)
	if n <= 0 {
		return bad("term")
	}
	rest = rest[n:]
	at, n := binary.Varint(rest)
	if n <= 0 {
		return bad("appended-at")
	}
	rest = rest[n:]
	bytesField := func(what string) ([]byte, error) {
		size, n := binary.Uvarint(rest)
		if n <= 0 || uint64(len(rest)-n) < size {
			return nil, bad(what)
		}
		var out []byte
		if size > 0 {
			out = append([]byte(nil), rest[n:n+int(size)]...)
		}
		rest = rest[n+int(size):]
		return out, nil
	}
	data, err := bytesField("data")
	if err != nil {
		return err
	}
	ext, err := bytesField("extensions")
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return bad("trailing bytes")
	}
	*l = raft.Log{Index: index, Term: term, Type: typ, Data: data, Extensions: ext}
	if at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	return nil
}
