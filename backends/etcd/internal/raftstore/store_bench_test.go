package raftstore

import (
	"errors"
	"sync"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/backends/internal/badgerlog"
	"github.com/ticketd/ticketd/backends/internal/watermark"
)

// benchStore is a Store with its watermark, kept as the etcd backend's loop
// keeps it: raised after every Save of entries.
type benchStore struct {
	st *Store
	wm *watermark.File
	mu sync.Mutex // appenders: one Save at a time, as the loop does
}

func openBenchStore(b *testing.B) *benchStore {
	b.Helper()
	dir := b.TempDir()
	db, err := badgerlog.Open(dir, "etcd", nil)
	if err != nil {
		b.Fatal(err)
	}
	st, err := Open(db, badgerlog.SnapshotDir(dir))
	if err != nil {
		b.Fatal(err)
	}
	wm, _, err := watermark.Open(dir, benchLog{st}, watermark.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := wm.Close(); err != nil {
			b.Error(err)
		}
		if err := st.Close(); err != nil {
			b.Error(err)
		}
		if err := db.Close(); err != nil {
			b.Error(err)
		}
	})
	return &benchStore{st: st, wm: wm}
}

// appender returns a function that saves batch entries of 64 bytes (the
// size of a ticketd grant) after the last one, with a HardState, and then
// raises the watermark, as one Ready of the etcd backend's loop does.
func (s *benchStore) appender(batch int) func() error {
	data := make([]byte, 64)
	return func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		last, _ := s.st.LastIndex()
		es := make([]*pb.Entry, batch)
		for j := range es {
			es[j] = &pb.Entry{Index: new(last + 1 + uint64(j)), Term: new(uint64(1)), Data: data}
		}
		if err := s.st.Save(hardState(1, 1, last), es, nil); err != nil {
			return err
		}
		return raiseMark(s.wm, last+uint64(batch))
	}
}

// raiseMark records last as the log's end, as the etcd backend does after a
// Save: in the background (watermark.File.Advance).
func raiseMark(wm *watermark.File, last uint64) error {
	return wm.Advance(last, 0)
}

// waitCompacted returns once the background deletion of compacted entries
// is done.
func (s *Store) waitCompacted() error { return s.compact.wait() }

// BenchmarkSave measures one durable Save of a batch of 1 and of 64
// entries of 64 bytes, with the watermark raised after it as the etcd
// backend's loop does.
func BenchmarkSave(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run(map[int]string{1: "batch=1", 64: "batch=64"}[batch], func(b *testing.B) {
			appendBatch := openBenchStore(b).appender(batch)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := appendBatch(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// compactEntries is what one snapshot compacts with the defaults
// (SnapshotThreshold 8192).
const compactEntries = 8192

// BenchmarkCompactionStall measures Saves of one entry while
// CreateSnapshot compacts the oldest compactEntries entries (and until its
// background deletion is done), against the same Saves with no snapshot
// ("compaction=off"): the ratio of their "append-p99-µs" (and
// "append-max-µs") is the stall. In the backend both run on the loop
// goroutine; here the snapshot runs beside the appends, so the figure shows
// what an append queues behind. One op is one round: compactEntries entries
// saved (unmeasured), then the snapshot with appends beside it.
func BenchmarkCompactionStall(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "compaction=off", true: "compaction=on"}[on], func(b *testing.B) {
			s := openBenchStore(b)
			setup := backendtest.Repeat(compactEntries/64, s.appender(64))
			b.ResetTimer()
			backendtest.AppendStall(b, 50, s.appender(1), setup, func() error {
				if !on {
					return nil
				}
				first, _ := s.st.FirstIndex()
				to := first + compactEntries - 1
				if err := s.st.CreateSnapshot(snapshot(to, 1, 1), to); err != nil {
					return err
				}
				return s.st.waitCompacted()
			})
		})
	}
}

// benchLog is the watermark's view of the new Store a benchmark opens
// (the etcd backend's adapter lives in the package that imports this one).
type benchLog struct{ s *Store }

func (l benchLog) Extent() (watermark.Extent, error) {
	if !l.s.IsEmpty() {
		return watermark.Extent{}, errors.New("benchmark store is not new")
	}
	return watermark.Extent{}, nil
}
