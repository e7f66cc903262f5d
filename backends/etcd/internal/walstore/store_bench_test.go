package walstore

import (
	"sync"
	"testing"

	"go.etcd.io/etcd/server/v3/storage/wal"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/ticketd/ticketd/backends/backendtest"
)

// compactEntries is what one snapshot compacts with the defaults
// (SnapshotThreshold 8192).
const compactEntries = 8192

// BenchmarkCompactionStall measures Saves of one entry while
// CreateSnapshot takes a snapshot and compacts the oldest compactEntries
// entries, against the same Saves with no snapshot ("compaction=off"): the
// ratio of their "append-p99-µs" (and "append-max-µs") is the stall. In
// the backend the snapshot runs on a goroutine of its own beside the
// loop's Saves, as here. "compaction=segment" makes the WAL cut a segment
// every 256 KiB, so every snapshot is written to disk and releases
// segments (what happens once per 16 MiB of log otherwise). One op is one
// round: compactEntries entries saved (unmeasured), then the snapshot with
// Saves beside it.
func BenchmarkCompactionStall(b *testing.B) {
	for _, mode := range []string{"off", "on", "segment"} {
		b.Run("compaction="+mode, func(b *testing.B) {
			on := mode != "off"
			if mode == "segment" {
				useSegmentSize() // before Open would, so the 256 KiB stays
				was := wal.SegmentSizeBytes
				wal.SegmentSizeBytes = 256 << 10
				b.Cleanup(func() { wal.SegmentSizeBytes = was })
			}
			s, err := Open(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				if err := s.Close(); err != nil {
					b.Error(err)
				}
			})
			var mu sync.Mutex // one Save at a time, as the loop does
			data := make([]byte, 64)
			save := func(n int) error {
				mu.Lock()
				defer mu.Unlock()
				last, _ := s.LastIndex()
				es := make([]*pb.Entry, n)
				for j := range es {
					es[j] = &pb.Entry{Index: new(last + 1 + uint64(j)), Term: new(uint64(1)), Data: data}
				}
				return s.Save(hardState(1, 1, last), es, nil)
			}
			setup := backendtest.Repeat(compactEntries/64, func() error { return save(64) })
			state := make([]byte, 4<<10) // a snapshot of a small lock table
			cs := &pb.ConfState{Voters: []uint64{1, 2, 3}}
			b.ResetTimer()
			backendtest.AppendStall(b, 50, func() error { return save(1) }, setup, func() error {
				if !on {
					return nil
				}
				last, _ := s.LastIndex()
				sn := &pb.Snapshot{Data: state, Metadata: &pb.SnapshotMetadata{Index: new(last), Term: new(uint64(1)), ConfState: cs}}
				return s.CreateSnapshot(sn, last-compactEntries/2)
			})
		})
	}
}
