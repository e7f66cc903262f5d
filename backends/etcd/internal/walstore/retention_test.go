package walstore

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/server/v3/storage/wal"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestSegmentsAre16MiB: a new store's WAL segment is preallocated to
// segmentBytes, not etcd's 64 MiB default.
func TestSegmentsAre16MiB(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	defer func() { require.NoError(t, s.Close()) }()
	segs, err := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	require.NoError(t, err)
	require.Len(t, segs, 1)
	fi, err := os.Stat(segs[0])
	require.NoError(t, err)
	require.Equal(t, int64(segmentBytes), fi.Size())
}

// TestUnreachableSnapshotFilePurged: a snapshot file older than the WAL's
// first segment is deleted at the next snapshot (Open could not start
// from it: the entries after it are gone), while one the WAL still
// reaches back to stays as the fallback, up to keepSnapshots files.
func TestUnreachableSnapshotFilePurged(t *testing.T) {
	useSegmentSize()
	was := wal.SegmentSizeBytes
	wal.SegmentSizeBytes = 4 << 10 // a segment per few dozen entries
	t.Cleanup(func() { wal.SegmentSizeBytes = was })

	dir := t.TempDir()
	s := open(t, dir)
	defer func() { require.NoError(t, s.Close()) }()
	cs := &pb.ConfState{Voters: []uint64{1}}
	snapAt := func(i uint64) {
		t.Helper()
		require.NoError(t, s.CreateSnapshot(&pb.Snapshot{Data: []byte("state"),
			Metadata: &pb.SnapshotMetadata{Index: new(i), Term: new(uint64(1)), ConfState: cs}}, i))
	}
	snapFiles := func() []string {
		t.Helper()
		snaps, err := filepath.Glob(filepath.Join(dir, "snap", "*.snap"))
		require.NoError(t, err)
		return snaps
	}
	big := func(from, to uint64) []*pb.Entry {
		out := ents(from, to, 1)
		for _, e := range out {
			e.Data = make([]byte, 512)
		}
		return out
	}
	require.NoError(t, s.Save(hardState(1, 1, 0), big(1, 40), nil))
	snapAt(10)
	snapAt(12) // the WAL still holds the entries after 10: both files stay
	require.Len(t, snapFiles(), 2)

	for i := uint64(41); i < 400; i += 10 { // the WAL cuts at most one segment per Save
		require.NoError(t, s.Save(hardState(1, 1, 0), big(i, i+9), nil))
	}
	snapAt(390) // segments before 390 are purged: 12 is unreachable
	from, err := firstSegmentIndex(filepath.Join(dir, "wal"))
	require.NoError(t, err)
	require.Greater(t, from, uint64(12), "the test wants the segments after 12 purged")
	require.Len(t, snapFiles(), 1, "a snapshot file the WAL cannot restart from is kept")
	require.Contains(t, snapFiles()[0], "-0000000000000186.snap")
}
