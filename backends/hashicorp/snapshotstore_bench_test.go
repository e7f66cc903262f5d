package hashicorp

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
)

// stallSnapshotBytes is the size of the snapshot BenchmarkSnapshotStall
// writes: about what core encodes for the commit benchmark's small table.
const stallSnapshotBytes = 4 << 10

// BenchmarkSnapshotStall measures appends of one entry to the wal log store
// while the node's snapshot store writes snapshots beside it in the same
// data dir, as hashicorp/raft's snapshot goroutine does (Create, the
// state written, Close; raft closes the sink again after FSMSnapshot.Persist
// closed it), against the same appends with no snapshot
// ("snapshots=off"): the ratio of their "append-p99-µs" is what the
// snapshot's file and directory syncs cost the log's. One op is one round of
// four snapshots with appends beside them.
func BenchmarkSnapshotStall(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("snapshots=%s", map[bool]string{false: "off", true: "on"}[on]), func(b *testing.B) {
			dir := b.TempDir()
			s := openMarkedStore(b, backends.LogStoreWAL, dir)
			snaps := openBenchSnapshots(b, dir)
			state := make([]byte, stallSnapshotBytes)
			var index uint64
			b.ResetTimer()
			backendtest.AppendStall(b, 50, appender(s, 1), func() error { return nil }, func() error {
				for range 4 {
					if !on {
						return nil
					}
					index++
					if err := writeSnapshot(snaps, index, state); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
}

// openBenchSnapshots opens the snapshot store of a node whose data dir is dir.
func openBenchSnapshots(b *testing.B, dir string) raft.SnapshotStore {
	b.Helper()
	snaps, err := newSnapshotStore(dir, snapshotRetain, newHCLog(zap.NewNop()))
	if err != nil {
		b.Fatal(err)
	}
	return snaps
}

// writeSnapshot writes one snapshot of state at index into snaps as
// hashicorp/raft's takeSnapshot does, closing the sink twice.
func writeSnapshot(snaps raft.SnapshotStore, index uint64, state []byte) error {
	conf := raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: "127.0.0.1:1", Suffrage: raft.Voter}}}
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, 1, conf, 1, nil)
	if err != nil {
		return err
	}
	if _, err := sink.Write(state); err != nil {
		_ = sink.Cancel()
		return err
	}
	if err := sink.Close(); err != nil {
		return err
	}
	return sink.Close()
}

// BenchmarkSnapshotWrite measures one snapshot of stallSnapshotBytes
// written through the node's snapshot store alone (Create, Write, Close
// twice, as raft does): its syncs are most of the time per op.
func BenchmarkSnapshotWrite(b *testing.B) {
	snaps := openBenchSnapshots(b, b.TempDir())
	state := make([]byte, stallSnapshotBytes)
	b.ResetTimer()
	for i := range b.N {
		if err := writeSnapshot(snaps, uint64(i+1), state); err != nil {
			b.Fatal(err)
		}
	}
}
