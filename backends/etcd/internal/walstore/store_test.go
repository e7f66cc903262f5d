package walstore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func ent(index, term uint64) *pb.Entry {
	return &pb.Entry{Index: new(index), Term: new(term), Data: fmt.Appendf(nil, "entry-%04d", index)}
}

func ents(from, to, term uint64) []*pb.Entry {
	var out []*pb.Entry
	for i := from; i <= to; i++ {
		out = append(out, ent(i, term))
	}
	return out
}

func hardState(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, nil)
	require.NoError(t, err)
	return s
}

// requireLog checks the store's bounds, its entries' data and its HardState.
func requireLog(t *testing.T, s *Store, first, last uint64, hs *pb.HardState) {
	t.Helper()
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	require.Equal(t, [2]uint64{first, last}, [2]uint64{f, l}, "bounds")
	got, err := s.Entries(first, last+1, ^uint64(0))
	require.NoError(t, err)
	for i, e := range got {
		require.Equal(t, first+uint64(i), e.GetIndex())
		require.Equal(t, ent(e.GetIndex(), 0).GetData(), e.GetData())
	}
	gotHS, _, err := s.InitialState()
	require.NoError(t, err)
	require.Equal(t, [3]uint64{hs.GetTerm(), hs.GetVote(), hs.GetCommit()}, [3]uint64{gotHS.GetTerm(), gotHS.GetVote(), gotHS.GetCommit()}, "hard state")
}

// TestReopen saves entries, a suffix overwrite, a snapshot with compaction
// and the peers, closes the store and opens it again: everything after the
// snapshot is there, the snapshot too, and the commit index kept only in
// memory was written by Close.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	require.True(t, s.IsEmpty())
	require.NoError(t, s.Save(hardState(1, 1, 0), ents(1, 20, 1), nil))
	require.NoError(t, s.Save(hardState(2, 2, 10), ents(15, 30, 2), nil)) // overwrites 15-20
	require.NoError(t, s.SavePeers([]byte("book")))
	cs := &pb.ConfState{Voters: []uint64{1}}
	require.NoError(t, s.CreateSnapshot(&pb.Snapshot{Data: []byte("state"), Metadata: &pb.SnapshotMetadata{Index: new(uint64(25)), Term: new(uint64(2)), ConfState: cs}}, 22))
	require.NoError(t, s.Save(hardState(2, 2, 28), nil, nil)) // commit only: no sync, kept for Close
	requireLog(t, s, 23, 30, hardState(2, 2, 28))
	require.NoError(t, s.Close())

	s = open(t, dir)
	defer func() { require.NoError(t, s.Close()) }()
	require.False(t, s.IsEmpty())
	requireLog(t, s, 26, 30, hardState(2, 2, 28)) // the WAL replays from the snapshot
	sn, err := s.Snapshot()
	require.NoError(t, err)
	require.Equal(t, uint64(25), sn.GetMetadata().GetIndex())
	require.Equal(t, []byte("state"), sn.GetData())
	require.Equal(t, []byte("book"), s.Peers())
	e, err := s.Entries(26, 27, ^uint64(0))
	require.NoError(t, err)
	require.Equal(t, uint64(2), e[0].GetTerm(), "the overwritten suffix is the new term's")
}

// TestSnapshotDataNotKeptInMemory: the MemoryStorage keeps a snapshot's
// metadata only, whether the snapshot was taken here (CreateSnapshot),
// received from the leader (Save) or found at Open, and Snapshot reads its
// Data back from its file; a missing file is an error, not an empty
// snapshot.
func TestSnapshotDataNotKeptInMemory(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	cs := &pb.ConfState{Voters: []uint64{1}}
	inMemory := func() []byte {
		sn, err := s.MemoryStorage.Snapshot()
		require.NoError(t, err)
		return sn.GetData()
	}
	requireSnapshot := func(index uint64, data string) {
		t.Helper()
		require.Nil(t, inMemory(), "the Data stays in its file")
		sn, err := s.Snapshot()
		require.NoError(t, err)
		require.Equal(t, index, sn.GetMetadata().GetIndex())
		require.Equal(t, []byte(data), sn.GetData())
		require.Equal(t, cs.GetVoters(), sn.GetMetadata().GetConfState().GetVoters())
	}
	require.NoError(t, s.Save(hardState(1, 1, 10), ents(1, 10, 1), nil))
	require.NoError(t, s.CreateSnapshot(&pb.Snapshot{Data: []byte("taken"), Metadata: &pb.SnapshotMetadata{Index: new(uint64(8)), Term: new(uint64(1)), ConfState: cs}}, 8))
	requireSnapshot(8, "taken")

	received := &pb.Snapshot{Data: []byte("received"), Metadata: &pb.SnapshotMetadata{Index: new(uint64(40)), Term: new(uint64(3)), ConfState: cs}}
	require.NoError(t, s.Save(hardState(3, 1, 40), nil, received))
	requireSnapshot(40, "received")
	require.Equal(t, []byte("received"), received.GetData(), "the caller's snapshot is left as it was")
	require.NoError(t, s.Close())

	s = open(t, dir)
	requireSnapshot(40, "received")
	require.NoError(t, os.Remove(filepath.Join(dir, "snap", snapFileName(received.GetMetadata()))))
	_, err := s.Snapshot()
	require.Error(t, err, "a snapshot whose file is gone")
	require.NoError(t, s.Close())
}

// TestGapRefused: entries that start past the log's end, and a snapshot
// past it, are errors, not panics inside MemoryStorage.
func TestGapRefused(t *testing.T) {
	s := open(t, t.TempDir())
	defer func() { require.NoError(t, s.Close()) }()
	require.NoError(t, s.Save(hardState(1, 1, 0), ents(1, 5, 1), nil))
	require.ErrorIs(t, s.Save(nil, ents(8, 9, 1), nil), ErrLogGap)
	cs := &pb.ConfState{Voters: []uint64{1}}
	err := s.CreateSnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(9)), Term: new(uint64(1)), ConfState: cs}}, 9)
	require.ErrorIs(t, err, raft.ErrUnavailable)
}

// TestDamagedRecordRefused flips a byte of an early entry in the WAL
// segment: Open fails (the WAL's CRC), instead of serving the entry.
func TestDamagedRecordRefused(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	for i := uint64(1); i <= 100; i += 10 {
		require.NoError(t, s.Save(hardState(1, 1, i), ents(i, i+9, 1), nil))
	}
	require.NoError(t, s.Close())
	segs, err := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	require.NoError(t, err)
	require.Len(t, segs, 1)
	b, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	at := bytes.Index(b, []byte("entry-0015"))
	require.Positive(t, at)
	b[at+8] ^= 0x01
	require.NoError(t, os.WriteFile(segs[0], b, 0o600))
	_, err = Open(dir, nil)
	require.Error(t, err, "a WAL with a damaged entry 15 opened")
}

// TestDamagedPeersRefused: a peers file that does not match its CRC is
// ErrCorrupt.
func TestDamagedPeersRefused(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	require.NoError(t, s.SavePeers([]byte("book")))
	require.NoError(t, s.Close())
	path := filepath.Join(dir, "peers")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[len(b)-1] ^= 0x01
	require.NoError(t, os.WriteFile(path, b, 0o600))
	_, err = Open(dir, nil)
	require.ErrorIs(t, err, ErrCorrupt)
}

// TestSnapshotFilesPurged: after many snapshots only the newest
// keepSnapshots snapshot files remain.
func TestSnapshotFilesPurged(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	defer func() { require.NoError(t, s.Close()) }()
	require.NoError(t, s.Save(hardState(1, 1, 0), ents(1, 50, 1), nil))
	cs := &pb.ConfState{Voters: []uint64{1}}
	for i := uint64(10); i <= 50; i += 10 {
		require.NoError(t, s.CreateSnapshot(&pb.Snapshot{Data: []byte("state"), Metadata: &pb.SnapshotMetadata{Index: new(i), Term: new(uint64(1)), ConfState: cs}}, i-5))
	}
	snaps, err := filepath.Glob(filepath.Join(dir, "snap", "*.snap"))
	require.NoError(t, err)
	require.Len(t, snaps, keepSnapshots)
}
