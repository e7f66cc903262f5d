package raftstore

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/ticketd/ticketd/backends/internal/badgerlog"
)

// snapFiles lists the files under the snapshot directory of dir.
func snapFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(badgerlog.SnapshotDir(dir))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	slices.Sort(out)
	return out
}

// storedSnapshot returns the snapshot record in badger, without checking
// its file.
func storedSnapshot(t *testing.T, db *badger.DB) *pb.Snapshot {
	t.Helper()
	snap := &pb.Snapshot{}
	require.NoError(t, db.View(func(txn *badger.Txn) error {
		rec, err := get(txn, keySnapshot)
		require.NoError(t, err)
		_, _, err = decodeSnapshotRecord(rec, snap)
		return err
	}))
	return snap
}

// TestSnapshotLivesInOneFile: a snapshot's Data goes to its own file, not
// into badger (whose value log would keep every superseded one); each new
// snapshot deletes the previous file once its record is durable, and a
// reopened store reads the Data back from the file.
func TestSnapshotLivesInOneFile(t *testing.T) {
	dir, st, db := newStore(t)
	require.NoError(t, st.Save(hardState(2, 0, 100), ents(1, 100, 2), nil))
	for _, idx := range []uint64{40, 70, 90} {
		require.NoError(t, st.CreateSnapshot(snapshot(idx, 2, 1), idx-5))
		require.Equal(t, []string{snapFileName(2, idx)}, snapFiles(t, dir), "after the snapshot at %d", idx)
		rec := storedSnapshot(t, db)
		require.Empty(t, rec.GetData(), "the badger record holds no snapshot data")
		require.Equal(t, idx, rec.GetMetadata().GetIndex())
	}
	// A snapshot from a leader goes the same way.
	require.NoError(t, st.Save(hardState(3, 0, 120), nil, snapshot(120, 3, 1, 2)))
	require.Equal(t, []string{snapFileName(3, 120)}, snapFiles(t, dir))
	st, db = reopen(t, dir, st, db)
	defer db.Close()
	snap, err := st.Snapshot()
	require.NoError(t, err)
	require.Equal(t, uint64(120), snap.GetMetadata().GetIndex())
	require.Equal(t, []byte("state"), snap.GetData())
	_, cs, err := st.InitialState()
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2}, cs.GetVoters())
	require.NoError(t, st.Close())
}

// TestCrashDuringSnapshotLeavesAStartableStore: whatever step of a snapshot
// a crash interrupts, the store opens on a complete state and drops the
// leftovers. The crash states are built directly: a temporary file (a
// crash while the file was written), a whole file whose record was never
// committed, and a committed record whose predecessor's file was never
// deleted.
func TestCrashDuringSnapshotLeavesAStartableStore(t *testing.T) {
	tests := []struct {
		name      string
		crash     func(t *testing.T, dir string, st *Store)
		wantIndex uint64 // the snapshot in force after the restart
	}{
		{"while_writing_the_file", func(t *testing.T, dir string, st *Store) {
			tmp := filepath.Join(badgerlog.SnapshotDir(dir), "12345"+tmpSuffix)
			require.NoError(t, os.WriteFile(tmp, []byte("half a snapsh"), 0o600))
		}, 40},
		{"file_written_record_not", func(t *testing.T, dir string, st *Store) {
			require.NoError(t, writeSnapFile(badgerlog.SnapshotDir(dir), snapshot(70, 2, 1)))
		}, 40},
		{"record_written_old_file_not_deleted", func(t *testing.T, dir string, st *Store) {
			old, err := os.ReadFile(filepath.Join(badgerlog.SnapshotDir(dir), snapFileName(2, 40)))
			require.NoError(t, err)
			require.NoError(t, st.CreateSnapshot(snapshot(70, 2, 1), 65))
			require.NoError(t, os.WriteFile(filepath.Join(badgerlog.SnapshotDir(dir), snapFileName(2, 40)), old, 0o600))
		}, 70},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, st, db := newStore(t)
			require.NoError(t, st.Save(hardState(2, 0, 100), ents(1, 100, 2), nil))
			require.NoError(t, st.CreateSnapshot(snapshot(40, 2, 1), 35))
			tt.crash(t, dir, st)
			st, db = reopen(t, dir, st, db)
			defer db.Close()
			snap, err := st.Snapshot()
			require.NoError(t, err)
			require.Equal(t, tt.wantIndex, snap.GetMetadata().GetIndex())
			require.Equal(t, []byte("state"), snap.GetData())
			_, last := lastFirst(t, st)
			require.Equal(t, uint64(100), last, "no entry lost")
			require.Equal(t, []string{snapFileName(2, tt.wantIndex)}, snapFiles(t, dir), "leftovers dropped")
			// The store goes on snapshotting.
			require.NoError(t, st.CreateSnapshot(snapshot(95, 2, 1), 90))
			require.NoError(t, st.Close())
		})
	}
}

// TestSnapshotFileLossIsRefused: the log was compacted behind the
// snapshot, so a missing or damaged snapshot file is ErrCorrupt, never a
// start on a shortened state.
func TestSnapshotFileLossIsRefused(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"deleted", func(t *testing.T, path string) { require.NoError(t, os.Remove(path)) }},
		{"cut", func(t *testing.T, path string) {
			fi, err := os.Stat(path)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(path, fi.Size()-3))
		}},
		{"flipped_byte", func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			b[len(b)-2] ^= 0x20
			require.NoError(t, os.WriteFile(path, b, 0o600))
		}},
		{"another_snapshot", func(t *testing.T, path string) {
			rec, err := marshalRecord(snapshot(41, 2, 1))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, rec, 0o600))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, st, db := newStore(t)
			require.NoError(t, st.Save(hardState(2, 0, 100), ents(1, 100, 2), nil))
			require.NoError(t, st.CreateSnapshot(snapshot(40, 2, 1), 35))
			require.NoError(t, st.Close())
			require.NoError(t, db.Close())
			tt.damage(t, filepath.Join(badgerlog.SnapshotDir(dir), snapFileName(2, 40)))
			db = openDB(t, dir)
			defer db.Close()
			_, err := Open(db, badgerlog.SnapshotDir(dir))
			require.ErrorIs(t, err, ErrCorrupt)
			t.Log(err)
		})
	}
}

// TestSnapshotRecordOfAnOlderVersion: a record that holds the snapshot's
// Data itself (how the store kept snapshots before they became files) is
// read as it is, and the next snapshot replaces it with a file.
func TestSnapshotRecordOfAnOlderVersion(t *testing.T) {
	dir, st, db := newStore(t)
	require.NoError(t, st.Save(hardState(2, 0, 100), ents(1, 100, 2), nil))
	require.NoError(t, st.Close())
	rec, err := encodeSnapshotRecord(30, 2, snapshot(40, 2, 1))
	require.NoError(t, err)
	require.NoError(t, db.Update(func(txn *badger.Txn) error { return txn.Set(keySnapshot, rec) }))
	require.NoError(t, db.Close())
	db = openDB(t, dir)
	st, err = Open(db, badgerlog.SnapshotDir(dir))
	require.NoError(t, err)
	snap, err := st.Snapshot()
	require.NoError(t, err)
	require.Equal(t, uint64(40), snap.GetMetadata().GetIndex())
	require.Equal(t, []byte("state"), snap.GetData())
	require.Empty(t, snapFiles(t, dir))

	require.NoError(t, st.CreateSnapshot(snapshot(80, 2, 1), 70))
	require.Empty(t, storedSnapshot(t, db).GetData())
	require.Equal(t, []string{snapFileName(2, 80)}, snapFiles(t, dir))
	st, db = reopen(t, dir, st, db)
	defer db.Close()
	snap, err = st.Snapshot()
	require.NoError(t, err)
	require.Equal(t, uint64(80), snap.GetMetadata().GetIndex())
	require.Equal(t, []byte("state"), snap.GetData())
	require.NoError(t, st.Close())
}

// TestStaleCreateSnapshotLeavesNoFile: a CreateSnapshot that a newer
// snapshot from the leader overtook (the node saved it while the state
// machine's copy was being written) is refused with raft.ErrSnapOutOfDate
// and leaves the leader's snapshot, and only its file, in force.
func TestStaleCreateSnapshotLeavesNoFile(t *testing.T) {
	dir, st, db := newStore(t)
	defer db.Close()
	require.NoError(t, st.Save(hardState(2, 0, 50), ents(1, 50, 2), nil))
	require.NoError(t, st.Save(hardState(3, 0, 60), nil, snapshot(60, 3, 1)))
	require.ErrorIs(t, st.CreateSnapshot(snapshot(50, 2, 1), 45), raft.ErrSnapOutOfDate)
	require.Equal(t, []string{snapFileName(3, 60)}, snapFiles(t, dir))
	require.NoError(t, st.Close())
}

func TestParseSnapFileName(t *testing.T) {
	idx, ok := parseSnapFileName(snapFileName(7, 0x1234))
	require.True(t, ok)
	require.Equal(t, uint64(0x1234), idx)
	for _, name := range []string{"x.snap", "0000000000000007-0000000000001234.tmp", "7-1234.snap", "000000000000000g-0000000000001234.snap"} {
		_, ok := parseSnapFileName(name)
		require.False(t, ok, name)
	}
}
