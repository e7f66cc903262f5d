package raftstore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/backends/internal/badgerlog"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openDB opens the badger database of dir the way the backend does.
func openDB(t *testing.T, dir string) *badger.DB {
	t.Helper()
	db, err := badgerlog.Open(dir, "etcd", nil)
	require.NoError(t, err)
	return db
}

// reopen closes st and db and opens the store in dir again.
func reopen(t *testing.T, dir string, st *Store, db *badger.DB) (*Store, *badger.DB) {
	t.Helper()
	require.NoError(t, st.Close())
	require.NoError(t, db.Close())
	db = openDB(t, dir)
	st, err := Open(db, badgerlog.SnapshotDir(dir))
	require.NoError(t, err)
	return st, db
}

func ent(index, term uint64, data string) *pb.Entry {
	return &pb.Entry{Index: new(index), Term: new(term), Data: []byte(data)}
}

func ents(from, to, term uint64) []*pb.Entry {
	var out []*pb.Entry
	for i := from; i <= to; i++ {
		out = append(out, ent(i, term, "x"))
	}
	return out
}

func hardState(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

func snapshot(index, term uint64, voters ...uint64) *pb.Snapshot {
	return &pb.Snapshot{
		Data: []byte("state"),
		Metadata: &pb.SnapshotMetadata{
			Index: new(index), Term: new(term),
			ConfState: &pb.ConfState{Voters: voters},
		},
	}
}

// terms returns the terms of entries [lo, hi] read through Term.
func terms(t *testing.T, st *Store, lo, hi uint64) []uint64 {
	t.Helper()
	var out []uint64
	for i := lo; i <= hi; i++ {
		term, err := st.Term(i)
		require.NoError(t, err)
		out = append(out, term)
	}
	return out
}

func lastFirst(t *testing.T, st *Store) (first, last uint64) {
	t.Helper()
	first, err := st.FirstIndex()
	require.NoError(t, err)
	last, err = st.LastIndex()
	require.NoError(t, err)
	return first, last
}

func newStore(t *testing.T) (string, *Store, *badger.DB) {
	t.Helper()
	dir := t.TempDir()
	db := openDB(t, dir)
	st, err := Open(db, badgerlog.SnapshotDir(dir))
	require.NoError(t, err)
	return dir, st, db
}

func TestEmptyStore(t *testing.T) {
	_, st, db := newStore(t)
	defer db.Close()
	require.True(t, st.IsEmpty())
	hs, cs, err := st.InitialState()
	require.NoError(t, err)
	require.True(t, raft.IsEmptyHardState(hs))
	require.Empty(t, cs.GetVoters())
	first, last := lastFirst(t, st)
	require.Equal(t, uint64(1), first)
	require.Equal(t, uint64(0), last)
	snap, err := st.Snapshot()
	require.NoError(t, err)
	require.True(t, raft.IsEmptySnap(snap))
	term, err := st.Term(0)
	require.NoError(t, err)
	require.Zero(t, term)
	require.NoError(t, st.Close())
}

func TestSaveAndReopen(t *testing.T) {
	dir, st, db := newStore(t)
	require.NoError(t, st.Save(hardState(2, 1, 0), nil, snapshot(1, 1, 1, 2, 3)))
	require.NoError(t, st.Save(hardState(2, 1, 3), ents(2, 10, 2), nil))
	require.False(t, st.IsEmpty())

	st, db = reopen(t, dir, st, db)
	defer db.Close()
	hs, cs, err := st.InitialState()
	require.NoError(t, err)
	require.Equal(t, uint64(2), hs.GetTerm())
	require.Equal(t, uint64(1), hs.GetVote())
	require.Equal(t, uint64(3), hs.GetCommit())
	require.Equal(t, []uint64{1, 2, 3}, cs.GetVoters())
	first, last := lastFirst(t, st)
	require.Equal(t, uint64(2), first)
	require.Equal(t, uint64(10), last)
	got, err := st.Entries(2, 11, 1<<20)
	require.NoError(t, err)
	require.Len(t, got, 9)
	require.Equal(t, uint64(2), got[0].GetIndex())
	require.Equal(t, []byte("x"), got[8].GetData())
	snap, err := st.Snapshot()
	require.NoError(t, err)
	require.Equal(t, uint64(1), snap.GetMetadata().GetIndex())
	require.Equal(t, []byte("state"), snap.GetData())
	require.NoError(t, st.Close())
}

func TestStaleSuffixIsRemoved(t *testing.T) {
	tests := []struct {
		name      string
		overwrite []*pb.Entry
		wantLast  uint64
		wantTerms []uint64
	}{
		{"shorter_new_suffix", ents(5, 6, 3), 6, []uint64{2, 2, 2, 3, 3}},
		{"longer_new_suffix", ents(8, 12, 3), 12, []uint64{2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3}},
		{"append_at_end", ents(11, 11, 2), 11, []uint64{2, 2, 2, 2, 2, 2, 2, 2, 2, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, st, db := newStore(t)
			require.NoError(t, st.Save(hardState(3, 0, 1), ents(1, 10, 2), nil))
			require.NoError(t, st.Save(nil, tt.overwrite, nil))
			check := func(st *Store) {
				_, last := lastFirst(t, st)
				require.Equal(t, tt.wantLast, last)
				require.Equal(t, tt.wantTerms, terms(t, st, 2, last))
			}
			check(st)
			st, db = reopen(t, dir, st, db)
			defer db.Close()
			check(st)
			// The stale entries are gone from badger, not only from memory.
			require.NoError(t, db.View(func(txn *badger.Txn) error {
				_, err := txn.Get(badgerlog.IndexKey(prefixEntry, tt.wantLast+1))
				require.ErrorIs(t, err, badger.ErrKeyNotFound)
				return nil
			}))
			require.NoError(t, st.Close())
		})
	}
}

func TestEntriesLimitsAndErrors(t *testing.T) {
	_, st, db := newStore(t)
	defer db.Close()
	require.NoError(t, st.Save(hardState(1, 0, 0), nil, snapshot(3, 1, 1)))
	require.NoError(t, st.Save(nil, ents(4, 9, 1), nil))
	size := uint64(proto.Size(ent(4, 1, "x")))

	tests := []struct {
		name    string
		lo, hi  uint64
		maxSize uint64
		want    int
		wantErr error
	}{
		{"all", 4, 10, 1 << 20, 6, nil},
		{"at_least_one", 4, 10, 0, 1, nil},
		{"limited", 4, 10, 3 * size, 3, nil},
		{"compacted", 3, 5, 1 << 20, 0, raft.ErrCompacted},
		{"past_last", 5, 11, 1 << 20, 0, raft.ErrUnavailable},
		{"empty_range", 5, 5, 1 << 20, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.Entries(tt.lo, tt.hi, tt.maxSize)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Len(t, got, tt.want)
		})
	}
	term, err := st.Term(3)
	require.NoError(t, err)
	require.Equal(t, uint64(1), term)
	_, err = st.Term(2)
	require.ErrorIs(t, err, raft.ErrCompacted)
	_, err = st.Term(10)
	require.ErrorIs(t, err, raft.ErrUnavailable)
	require.NoError(t, st.Close())
}

func TestSnapshotFromLeaderReplacesLog(t *testing.T) {
	dir, st, db := newStore(t)
	require.NoError(t, st.Save(hardState(1, 0, 2), ents(1, 5, 1), nil))
	// A leader's snapshot at 20 (term 4), followed by entries 21..22.
	require.NoError(t, st.Save(hardState(4, 0, 20), ents(21, 22, 4), snapshot(20, 4, 1, 2)))
	_, err := st.Term(5)
	require.ErrorIs(t, err, raft.ErrCompacted)

	st, db = reopen(t, dir, st, db)
	defer db.Close()
	first, last := lastFirst(t, st)
	require.Equal(t, uint64(21), first)
	require.Equal(t, uint64(22), last)
	require.Equal(t, []uint64{4, 4, 4}, terms(t, st, 20, 22))
	_, cs, err := st.InitialState()
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2}, cs.GetVoters())
	// An older snapshot is refused.
	require.ErrorIs(t, st.Save(nil, nil, snapshot(10, 3, 1)), raft.ErrSnapOutOfDate)
	require.NoError(t, st.Close())
}

// TestSnapshotDataNotKeptInMemory: the store keeps a snapshot's metadata
// only, whether the snapshot was taken here (CreateSnapshot), received from
// the leader (Save) or found at Open, and Snapshot reads its Data back from
// its file.
func TestSnapshotDataNotKeptInMemory(t *testing.T) {
	dir, st, db := newStore(t)
	requireSnapshot := func(index uint64) {
		t.Helper()
		st.mu.Lock()
		kept := st.snap.GetData()
		st.mu.Unlock()
		require.Nil(t, kept, "the Data stays in its file")
		sn, err := st.Snapshot()
		require.NoError(t, err)
		require.Equal(t, index, sn.GetMetadata().GetIndex())
		require.Equal(t, []byte("state"), sn.GetData())
	}
	require.NoError(t, st.Save(hardState(1, 0, 10), ents(1, 10, 1), nil))
	require.NoError(t, st.CreateSnapshot(snapshot(8, 1, 1), 5))
	requireSnapshot(8)
	received := snapshot(20, 2, 1)
	require.NoError(t, st.Save(hardState(2, 0, 20), nil, received))
	requireSnapshot(20)
	require.Equal(t, []byte("state"), received.GetData(), "the caller's snapshot is left as it was")
	st, db = reopen(t, dir, st, db)
	defer db.Close()
	requireSnapshot(20)
	require.NoError(t, st.Close())
}

func TestCreateSnapshotCompacts(t *testing.T) {
	dir, st, db := newStore(t)
	require.NoError(t, st.Save(hardState(2, 0, 100), ents(1, 100, 2), nil))
	require.NoError(t, st.CreateSnapshot(snapshot(90, 2, 1), 60))
	first, last := lastFirst(t, st)
	require.Equal(t, uint64(61), first)
	require.Equal(t, uint64(100), last)
	_, err := st.Entries(60, 61, 1<<20)
	require.ErrorIs(t, err, raft.ErrCompacted)
	term, err := st.Term(60)
	require.NoError(t, err)
	require.Equal(t, uint64(2), term)

	// Compacting to a point at or below the current one keeps the log; the
	// snapshot still moves on.
	require.NoError(t, st.CreateSnapshot(snapshot(95, 2, 1), 10))
	first, _ = lastFirst(t, st)
	require.Equal(t, uint64(61), first)
	require.ErrorIs(t, st.CreateSnapshot(snapshot(95, 2, 1), 95), raft.ErrSnapOutOfDate)
	require.ErrorIs(t, st.CreateSnapshot(snapshot(101, 2, 1), 95), raft.ErrUnavailable)

	st, db = reopen(t, dir, st, db)
	defer db.Close()
	first, last = lastFirst(t, st)
	require.Equal(t, uint64(61), first)
	require.Equal(t, uint64(100), last)
	snap, err := st.Snapshot()
	require.NoError(t, err)
	require.Equal(t, uint64(95), snap.GetMetadata().GetIndex())
	require.NoError(t, db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(badgerlog.IndexKey(prefixEntry, 60))
		require.ErrorIs(t, err, badger.ErrKeyNotFound)
		return nil
	}))
	require.NoError(t, st.Close())
}

func TestCommitOnlyHardStateIsDeferred(t *testing.T) {
	dir, st, db := newStore(t)
	require.NoError(t, st.Save(hardState(1, 1, 0), ents(1, 5, 1), nil))
	require.NoError(t, st.Save(hardState(1, 1, 4), nil, nil))
	hs, _, err := st.InitialState()
	require.NoError(t, err)
	require.Equal(t, uint64(4), hs.GetCommit(), "raft reads the latest commit")
	// Not on disk yet: the durable record still says commit 0.
	require.NoError(t, db.View(func(txn *badger.Txn) error {
		rec, err := get(txn, keyHardState)
		require.NoError(t, err)
		onDisk := &pb.HardState{}
		require.NoError(t, unmarshalRecord("hs", rec, onDisk))
		require.Equal(t, uint64(0), onDisk.GetCommit())
		return nil
	}))
	// Close writes it.
	st, db = reopen(t, dir, st, db)
	defer db.Close()
	hs, _, err = st.InitialState()
	require.NoError(t, err)
	require.Equal(t, uint64(4), hs.GetCommit())
	require.NoError(t, st.Close())
}

func TestLargeBatchIsSplitSafely(t *testing.T) {
	dir, st, db := newStore(t)
	big := bytes.Repeat([]byte("b"), 200<<10)
	var batch []*pb.Entry
	for i := uint64(1); i <= 30; i++ { // ~6 MiB: more than one badger transaction
		batch = append(batch, &pb.Entry{Index: new(i), Term: new(uint64(1)), Data: big})
	}
	require.NoError(t, st.Save(hardState(1, 0, 30), batch, nil))
	st, db = reopen(t, dir, st, db)
	defer db.Close()
	_, last := lastFirst(t, st)
	require.Equal(t, uint64(30), last)
	got, err := st.Entries(30, 31, 1<<30)
	require.NoError(t, err)
	require.Equal(t, big, got[0].GetData())
	require.NoError(t, st.Close())
}

func TestInterruptedCompactionLeftoversAreDropped(t *testing.T) {
	dir, st, db := newStore(t)
	require.NoError(t, st.Save(hardState(1, 0, 10), ents(1, 10, 1), nil))
	require.NoError(t, st.CreateSnapshot(snapshot(8, 1, 1), 5))
	// Put back entry 3 as if the deletion after the snapshot record was lost.
	rec, err := marshalRecord(ent(3, 1, "x"))
	require.NoError(t, err)
	require.NoError(t, db.Update(func(txn *badger.Txn) error { return txn.Set(badgerlog.IndexKey(prefixEntry, 3), rec) }))
	st, db = reopen(t, dir, st, db)
	defer db.Close()
	first, _ := lastFirst(t, st)
	require.Equal(t, uint64(6), first)
	require.NoError(t, db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(badgerlog.IndexKey(prefixEntry, 3))
		require.ErrorIs(t, err, badger.ErrKeyNotFound)
		return nil
	}))
	require.NoError(t, st.Close())
}

// TestCorruptionIsDetected damages one record directly in badger and checks
// that Open refuses the store with ErrCorrupt.
func TestCorruptionIsDetected(t *testing.T) {
	entryKey := func(i uint64) []byte { return badgerlog.IndexKey(prefixEntry, i) }
	tests := []struct {
		name   string
		damage func(txn *badger.Txn) error
	}{
		{"cut_last_entry", func(txn *badger.Txn) error {
			return rewrite(txn, entryKey(10), func(v []byte) []byte { return v[:len(v)-2] })
		}},
		{"flip_byte_in_entry", func(txn *badger.Txn) error {
			return rewrite(txn, entryKey(5), func(v []byte) []byte { v[len(v)-1] ^= 0x40; return v })
		}},
		{"entry_shorter_than_checksum", func(txn *badger.Txn) error {
			return rewrite(txn, entryKey(7), func(v []byte) []byte { return v[:2] })
		}},
		{"flip_byte_in_hard_state", func(txn *badger.Txn) error {
			return rewrite(txn, keyHardState, func(v []byte) []byte { v[5] ^= 1; return v })
		}},
		{"cut_snapshot", func(txn *badger.Txn) error {
			return rewrite(txn, keySnapshot, func(v []byte) []byte { return v[:len(v)/2] })
		}},
		{"flip_byte_in_peers", func(txn *badger.Txn) error {
			return rewrite(txn, keyPeers, func(v []byte) []byte { v[len(v)-1] ^= 1; return v })
		}},
		{"gap_in_log", func(txn *badger.Txn) error { return txn.Delete(entryKey(6)) }},
		{"committed_entry_missing", func(txn *badger.Txn) error { return txn.Delete(entryKey(10)) }},
		{"entry_under_wrong_key", func(txn *badger.Txn) error {
			rec, err := marshalRecord(ent(12, 2, "x"))
			if err != nil {
				return err
			}
			return txn.Set(entryKey(11), rec)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, st, db := newStore(t)
			require.NoError(t, st.Save(hardState(2, 1, 1), nil, snapshot(1, 1, 1)))
			require.NoError(t, st.Save(hardState(2, 1, 10), ents(2, 10, 2), nil))
			require.NoError(t, st.SavePeers([]byte(`{"peers":[]}`)))
			require.NoError(t, st.Close())
			require.NoError(t, db.Update(tt.damage))
			require.NoError(t, db.Close())

			db = openDB(t, dir)
			defer db.Close()
			_, err := Open(db, badgerlog.SnapshotDir(dir))
			require.ErrorIs(t, err, ErrCorrupt)
			t.Log(err)
		})
	}
}

func rewrite(txn *badger.Txn, key []byte, f func([]byte) []byte) error {
	item, err := txn.Get(key)
	if err != nil {
		return err
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return err
	}
	return txn.Set(key, f(v))
}

func TestSaveRefusesGap(t *testing.T) {
	_, st, db := newStore(t)
	defer db.Close()
	require.NoError(t, st.Save(hardState(1, 0, 0), ents(1, 3, 1), nil))
	err := st.Save(nil, ents(5, 6, 1), nil)
	require.True(t, errors.Is(err, ErrLogGap), "got %v", err)
	require.NoError(t, st.Close())
}

func TestPeersRoundTrip(t *testing.T) {
	dir, st, db := newStore(t)
	require.Nil(t, st.Peers())
	require.NoError(t, st.SavePeers([]byte("book-1")))
	require.NoError(t, st.SavePeers([]byte("book-2")))
	st, db = reopen(t, dir, st, db)
	defer db.Close()
	require.Equal(t, []byte("book-2"), st.Peers())
	require.NoError(t, st.Close())
}

// TestCompactionDeletesInBackground: CreateSnapshot returns with the
// compaction point moved, and the compacted entries (more than one chunk of
// them) are then deleted from badger in the background, in order, leaving
// none behind.
func TestCompactionDeletesInBackground(t *testing.T) {
	_, st, db := newStore(t)
	defer db.Close()
	const n, compactTo = 3 * badgerlog.CompactChunk, 2*badgerlog.CompactChunk + 7
	require.NoError(t, st.Save(hardState(1, 0, n), ents(1, n, 1), nil))
	require.NoError(t, st.CreateSnapshot(snapshot(n-1, 1, 1), compactTo))
	first, _ := lastFirst(t, st)
	require.Equal(t, uint64(compactTo+1), first)
	require.NoError(t, st.waitCompacted())
	require.NoError(t, db.View(func(txn *badger.Txn) error {
		got, ok, err := badgerlog.FirstIndex(txn, prefixEntry, 0)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, uint64(compactTo+1), got, "first entry left in badger")
		return nil
	}))
	require.NoError(t, st.Close())
}
