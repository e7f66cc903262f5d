package hashicorp

import (
	"fmt"
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/backends/internal/watermark"
)

// openMarkedStore opens the given log store in dir with its watermark, as
// a node runs it.
func openMarkedStore(b *testing.B, store, dir string) nodeStore {
	b.Helper()
	s := openTestStore(b, store, dir)
	wm, _, err := watermark.Open(dir, storedLog{logs: s, stable: s, snaps: raft.NewInmemSnapshotStore()}, watermark.Options{})
	if err != nil {
		b.Fatal(err)
	}
	s.hooks().wm = wm
	b.Cleanup(func() {
		if err := wm.Close(); err != nil {
			b.Error(err)
		}
		closeStore(b, s)
	})
	return s
}

// appendMu makes appenders one at a time, as raft's main goroutine is.
var appendMu sync.Mutex

// appender returns a function that appends batch entries of 64 bytes (the
// size of a ticketd grant) after the last one in s.
func appender(s nodeStore, batch int) func() error {
	data := make([]byte, 64)
	logs := make([]*raft.Log, batch)
	return func() error {
		appendMu.Lock()
		defer appendMu.Unlock()
		next, _ := s.LastIndex()
		for j := range logs {
			next++
			logs[j] = &raft.Log{Index: next, Term: 1, Data: data}
		}
		return s.StoreLogs(logs)
	}
}

// BenchmarkStoreLogs measures one durable StoreLogs call of each log store
// (badger with SyncWrites, raft-wal with its fdatasync; and the watermark as
// a node keeps it) of a batch of 1 and of 64 entries of 64 bytes.
func BenchmarkStoreLogs(b *testing.B) {
	for _, store := range backends.LogStores() {
		for _, batch := range []int{1, 64} {
			b.Run(fmt.Sprintf("store=%s/batch=%d", store, batch), func(b *testing.B) {
				s := openMarkedStore(b, store, b.TempDir())
				appendBatch := appender(s, batch)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := appendBatch(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// compactEntries is what one snapshot compacts with the defaults
// (SnapshotThreshold 8192).
const compactEntries = 8192

// BenchmarkCompactionStall measures appends of one entry while a
// compaction deletes the oldest compactEntries entries of the log
// (DeleteRange, as raft calls it after a snapshot), against the same appends
// with no compaction ("compaction=off"), per log store: the ratio of their
// "append-p99-µs" (and "append-max-µs") is the stall. One op is one round:
// compactEntries entries appended (unmeasured), then the compaction with
// appends beside it.
func BenchmarkCompactionStall(b *testing.B) {
	for _, store := range backends.LogStores() {
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("store=%s/compaction=%s", store, map[bool]string{false: "off", true: "on"}[on]), func(b *testing.B) {
				compactionStall(b, store, on)
			})
		}
	}
}

// compactionStall is one case of BenchmarkCompactionStall.
func compactionStall(b *testing.B, store string, on bool) {
	s := openMarkedStore(b, store, b.TempDir())
	setup := backendtest.Repeat(compactEntries/64, appender(s, 64))
	b.ResetTimer()
	backendtest.AppendStall(b, 50, appender(s, 1), setup, func() error {
		if !on {
			return nil
		}
		first, _ := s.FirstIndex()
		return s.DeleteRange(first, first+compactEntries-1)
	})
}
