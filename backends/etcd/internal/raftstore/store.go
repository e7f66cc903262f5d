package raftstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/backends/internal/badgerlog"
)

// Sentinel errors of package raftstore. Compare with errors.Is. Storage
// methods also return raft.ErrCompacted, raft.ErrUnavailable and
// raft.ErrSnapOutOfDate as raft.Storage prescribes.
var (
	// ErrCorrupt: the state on disk does not verify (a checksum mismatch, a cut
	// record, a gap in the log, or a HardState that contradicts the log). The
	// node must not start on it; restore the data dir from a peer instead.
	ErrCorrupt = errors.New("raftstore: corrupt raft state on disk")
	// ErrLogGap: Save was handed entries that do not continue the log (a bug
	// in the caller or in raft; nothing was written).
	ErrLogGap = errors.New("raftstore: entries do not continue the log")
)

// Badger keys; see the package comment for the layout.
var (
	prefixEntry  = []byte("etcd/entry/")
	keyHardState = []byte("etcd/hardstate")
	keySnapshot  = []byte("etcd/snapshot")
)

// Store is a raft.Storage on badger, safe for concurrent use. Writers (Save,
// CreateSnapshot, Close) are serialised among themselves and do their disk
// I/O without blocking readers: raft's reads (from the goroutine driving the
// RawNode) see the state before a write until the write is durable, which is
// what raft expects with AsyncStorageWrites (it reads from Storage only
// entries it was told are stable).
type Store struct {
	db      *badger.DB
	snapDir string // where snapshot files live (snapfile.go)

	// wmu serialises writers. A writer holding it may read the fields below
	// without mu (only writers change them) and takes mu to change them.
	wmu sync.Mutex
	mu  sync.Mutex
	// hs is the latest HardState handed to Save; hsDisk the one on disk. When
	// hsDirty, they differ in Commit only (see Save).
	hs      *pb.HardState
	hsDisk  *pb.HardState
	hsDirty bool
	// snap is the latest snapshot (never nil; index 0 when there is none),
	// with its Data; snapName is its file under snapDir ("" for none, or
	// for a snapshot an older version kept inside its badger record).
	snap     *pb.Snapshot
	snapName string
	// truncIndex and truncTerm name the last entry dropped from the log (the
	// "dummy entry" of raft.MemoryStorage): ents[i].Index == truncIndex+1+i.
	truncIndex, truncTerm uint64
	ents                  []*pb.Entry
	// peers is the caller's address book record (see SavePeers).
	peers []byte

	// compact deletes compacted entries in the background (compact.go).
	compact compactor
}

var _ raft.Storage = (*Store)(nil)

// Open loads and verifies the raft state stored in db and the snapshot
// file under snapDir its record names (see the package comment), then
// deletes what a crash may have left: compacted entries, snapshot files
// no record names, temporary files. Errors wrap ErrCorrupt for data that
// does not verify (a missing snapshot file included), or are badger's or
// the file system's. The caller keeps ownership of db and closes it after
// Close.
func Open(db *badger.DB, snapDir string) (*Store, error) {
	s := &Store{db: db, snapDir: snapDir, snap: pb.EnsureSnapshot(nil)}
	var garbage [][]byte
	err := db.View(func(txn *badger.Txn) error {
		if rec, err := get(txn, keyHardState); err != nil {
			return err
		} else if rec != nil {
			s.hs = &pb.HardState{}
			if err := unmarshalRecord("hard state", rec, s.hs); err != nil {
				return err
			}
			s.hsDisk = s.hs
		}
		if rec, err := get(txn, keySnapshot); err != nil {
			return err
		} else if rec != nil {
			snap := &pb.Snapshot{}
			ti, tt, err := decodeSnapshotRecord(rec, snap)
			if err != nil {
				return err
			}
			s.snap, s.truncIndex, s.truncTerm = pb.EnsureSnapshot(snap), ti, tt
		}
		if err := s.loadPeers(txn); err != nil {
			return err
		}
		var err error
		garbage, err = s.loadEntries(txn)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	if s.snap.GetMetadata().GetIndex() > 0 && len(s.snap.GetData()) == 0 {
		// The record names a file; a record with Data is an older
		// version's, whose snapshot lived inside it.
		snap, err := readSnapFile(snapDir, s.snap) // checked now; Snapshot reads it again
		if err != nil {
			return nil, fmt.Errorf("open: %w", err)
		}
		s.snap = metadataOnly(snap)
		s.snapName = snapFileName(snap.GetMetadata().GetTerm(), snap.GetMetadata().GetIndex())
	}
	if err := s.verify(); err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	if err := removeSnapFiles(snapDir, s.snapName, s.snap.GetMetadata().GetIndex(), true); err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	if len(garbage) > 0 {
		// Left by a compaction that was cut short: already covered by the
		// snapshot, so dropping them is what the compaction meant to do.
		err := badgerlog.Batch(db, len(garbage), func(txn *badger.Txn, i int) error { return txn.Delete(garbage[i]) })
		if err != nil {
			return nil, fmt.Errorf("raftstore: open: drop compacted entries: %w", err)
		}
	}
	return s, nil
}

// get returns the value of key, or nil when there is none.
func get(txn *badger.Txn, key []byte) ([]byte, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}

// loadEntries reads and verifies every entry record above the compaction
// point into s.ents and returns the keys of those at or below it.
func (s *Store) loadEntries(txn *badger.Txn) (garbage [][]byte, err error) {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefixEntry
	it := txn.NewIterator(opts)
	defer it.Close()
	prevTerm := s.truncTerm
	for it.Rewind(); it.ValidForPrefix(prefixEntry); it.Next() {
		item := it.Item()
		idx, err := badgerlog.ParseIndexKey(prefixEntry, item.Key())
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		if idx <= s.truncIndex {
			garbage = append(garbage, item.KeyCopy(nil))
			continue
		}
		if want := s.truncIndex + uint64(len(s.ents)) + 1; idx != want {
			return nil, fmt.Errorf("%w: log has a gap: entry %d follows %d", ErrCorrupt, idx, want-1)
		}
		rec, err := item.ValueCopy(nil)
		if err != nil {
			return nil, err
		}
		e := &pb.Entry{}
		if err := unmarshalRecord(fmt.Sprintf("entry %d", idx), rec, e); err != nil {
			return nil, err
		}
		if e.GetIndex() != idx {
			return nil, fmt.Errorf("%w: entry stored under index %d says index %d", ErrCorrupt, idx, e.GetIndex())
		}
		if e.GetTerm() < prevTerm {
			return nil, fmt.Errorf("%w: entry %d has term %d below the previous entry's %d", ErrCorrupt, idx, e.GetTerm(), prevTerm)
		}
		prevTerm = e.GetTerm()
		s.ents = append(s.ents, e)
	}
	return garbage, nil
}

// verify checks that the HardState, snapshot and log agree, as raft itself
// assumes (it would panic otherwise).
func (s *Store) verify() error {
	last := s.lastIndex()
	si := s.snap.GetMetadata().GetIndex()
	if si < s.truncIndex || si > last {
		return fmt.Errorf("%w: snapshot index %d outside the log [%d, %d]", ErrCorrupt, si, s.truncIndex, last)
	}
	if si > 0 && s.truncIndex == si && s.truncTerm != s.snap.GetMetadata().GetTerm() {
		return fmt.Errorf("%w: snapshot term %d, compaction point term %d", ErrCorrupt, s.snap.GetMetadata().GetTerm(), s.truncTerm)
	}
	if raft.IsEmptyHardState(s.hs) {
		if last > 0 {
			return fmt.Errorf("%w: log of %d entries without a hard state", ErrCorrupt, last)
		}
		return nil
	}
	if c := s.hs.GetCommit(); c < s.truncIndex || c > last {
		return fmt.Errorf("%w: hard state commit %d outside the log [%d, %d] (entries lost?)", ErrCorrupt, c, s.truncIndex, last)
	}
	if lt := s.termAt(last); s.hs.GetTerm() < lt {
		return fmt.Errorf("%w: hard state term %d below the last entry's term %d", ErrCorrupt, s.hs.GetTerm(), lt)
	}
	return nil
}

// IsEmpty reports whether the store holds no state at all (a node that has
// never been bootstrapped nor joined).
func (s *Store) IsEmpty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return raft.IsEmptyHardState(s.hs) && raft.IsEmptySnap(s.snap) && len(s.ents) == 0
}

// InitialState implements raft.Storage: the latest HardState and the
// ConfState of the latest snapshot (configuration changes after it are in the
// log and are re-applied by the caller when raft hands them back).
func (s *Store) InitialState() (*pb.HardState, *pb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var hs *pb.HardState
	if s.hs != nil {
		hs = proto.Clone(s.hs).(*pb.HardState)
	}
	cs := proto.Clone(pb.EnsureConfState(s.snap.GetMetadata().GetConfState())).(*pb.ConfState)
	return hs, cs, nil
}

// Entries implements raft.Storage: entries [lo, hi) of at most maxSize bytes
// in total (but at least one). Errors: raft.ErrCompacted for lo at or below
// the compaction point, raft.ErrUnavailable for hi past the last index.
func (s *Store) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lo <= s.truncIndex {
		return nil, raft.ErrCompacted
	}
	if last := s.lastIndex(); hi > last+1 {
		return nil, fmt.Errorf("%w: entries [%d, %d) past last index %d", raft.ErrUnavailable, lo, hi, last)
	}
	if lo >= hi {
		return nil, nil
	}
	ents := s.ents[lo-s.truncIndex-1 : hi-s.truncIndex-1]
	n, size := 1, uint64(proto.Size(ents[0]))
	for ; n < len(ents); n++ {
		size += uint64(proto.Size(ents[n]))
		if size > maxSize {
			break
		}
	}
	out := make([]*pb.Entry, n)
	copy(out, ents)
	return out, nil
}

// Term implements raft.Storage: the term of entry i, for i in
// [FirstIndex()-1, LastIndex()].
func (s *Store) Term(i uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < s.truncIndex {
		return 0, raft.ErrCompacted
	}
	if i > s.lastIndex() {
		return 0, raft.ErrUnavailable
	}
	return s.termAt(i), nil
}

// termAt returns the term of entry i in [truncIndex, lastIndex()].
func (s *Store) termAt(i uint64) uint64 {
	if i == s.truncIndex {
		return s.truncTerm
	}
	return s.ents[i-s.truncIndex-1].GetTerm()
}

// LastIndex implements raft.Storage.
func (s *Store) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastIndex(), nil
}

func (s *Store) lastIndex() uint64 { return s.truncIndex + uint64(len(s.ents)) }

// FirstIndex implements raft.Storage: the first index still in the log.
func (s *Store) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.truncIndex + 1, nil
}

// Snapshot implements raft.Storage: the latest snapshot (index 0 when there is
// none), its Data read from its file (readSnapFile), which stays until a
// newer snapshot's record replaces it. The store keeps only the metadata in
// memory: the Data, the whole lock table encoded (tens of MB at a million
// locks), is needed only when raft sends a snapshot to a follower behind
// the log's start and when the node restores at start
// (docs/benchmarks.md#scale-a-million-locks, what a lock costs in memory).
// A snapshot of an older version's record, whose Data lived in the record,
// is kept whole. The returned snapshot is shared and must not be modified.
// Errors: readSnapFile's.
func (s *Store) Snapshot() (*pb.Snapshot, error) {
	s.mu.Lock() // no newer snapshot's record, nor file purge, meanwhile
	defer s.mu.Unlock()
	if raft.IsEmptySnap(s.snap) || len(s.snap.GetData()) > 0 {
		return s.snap, nil
	}
	return readSnapFile(s.snapDir, s.snap)
}

// Save durably records one raft.Ready's HardState, Entries and Snapshot (any
// may be nil or empty) as one synced badger batch, the dgraph raftwal
// DiskStorage.Save shape, following etcd raft doc.go step 1:
//
//   - a snapshot replaces the whole log: entries above its index are deleted,
//     and it becomes the compaction point;
//   - entries overwrite the log from their first index; every older entry at
//     or above that index that they do not cover (the stale suffix of a
//     deposed leader) is deleted in the same batch;
//   - the HardState is written last, its Commit raised to the compaction
//     point if needed.
//
// A HardState update that changes only Commit is kept in memory (InitialState
// returns it) and reaches the disk with the next change of term or vote, the
// next snapshot, or Close: the commit index need not be durable (Raft thesis
// §3.8; etcd raft's MustSync ignores it), a restarted node learns it again
// from the leader, and writing it would cost an fsync on the commit path of
// every entry. The stored commit index is thus a lower bound, never past the
// log nor below the compaction point.
//
// Only in the rare case that the batch exceeds badger's transaction limit is
// it split, in an order where every prefix is a valid state (deletions first,
// then entries in index order under a HardState whose Commit does not reach
// past them, then the HardState). Errors are badger's, ErrLogGap, or
// raft.ErrSnapOutOfDate for a snapshot older than the stored one; on error the
// node must stop, as the store no longer knows what is on disk.
func (s *Store) Save(hs *pb.HardState, ents []*pb.Entry, snap *pb.Snapshot) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	hasHS := !raft.IsEmptyHardState(hs)
	hasSnap := !raft.IsEmptySnap(snap)
	if !hasHS && !hasSnap && len(ents) == 0 {
		return nil
	}
	// Only a change of term or vote (or a snapshot) makes the HardState worth
	// an fsync of its own or a write at all; a new commit index rides along
	// with the next such write, or Close.
	writeHS := hasSnap || (hasHS && (s.hsDisk == nil ||
		hs.GetTerm() != s.hsDisk.GetTerm() || hs.GetVote() != s.hsDisk.GetVote()))
	if hasHS && !writeHS && len(ents) == 0 {
		s.mu.Lock()
		s.hs, s.hsDirty = proto.Clone(hs).(*pb.HardState), true
		s.mu.Unlock()
		return nil
	}

	var ops []func(txn *badger.Txn) error
	del := func(i uint64) {
		ops = append(ops, func(txn *badger.Txn) error { return txn.Delete(badgerlog.IndexKey(prefixEntry, i)) })
	}
	set := func(key, val []byte) { ops = append(ops, func(txn *badger.Txn) error { return txn.Set(key, val) }) }

	truncIndex, truncTerm, newSnap := s.truncIndex, s.truncTerm, s.snap
	logEnts := s.ents
	var garbageFrom, garbageTo uint64 // entries (garbageFrom, garbageTo] to drop last
	if hasSnap {
		si, st := snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
		if si <= s.snap.GetMetadata().GetIndex() {
			return fmt.Errorf("raftstore: save snapshot %d over %d: %w", si, s.snap.GetMetadata().GetIndex(), raft.ErrSnapOutOfDate)
		}
		for i := max(si+1, truncIndex+1); i <= s.lastIndex(); i++ {
			del(i)
		}
		// The file first: the record that names it is written only once
		// the file is durable.
		if err := writeSnapFile(s.snapDir, snap); err != nil {
			return badgerlog.DiskFull(err)
		}
		rec, err := encodeSnapshotRecord(si, st, metadataOnly(snap))
		if err != nil {
			return err
		}
		set(keySnapshot, rec)
		garbageFrom, garbageTo = truncIndex, min(si, s.lastIndex())
		truncIndex, truncTerm, newSnap, logEnts = si, st, metadataOnly(snap), nil
	}

	newHS := s.hs
	if hasHS {
		newHS = proto.Clone(hs).(*pb.HardState)
	}
	if newHS != nil && newHS.GetCommit() < truncIndex {
		newHS = proto.Clone(newHS).(*pb.HardState)
		newHS.Commit = new(truncIndex)
	}

	if len(ents) > 0 && ents[len(ents)-1].GetIndex() > truncIndex {
		if first := ents[0].GetIndex(); first <= truncIndex {
			ents = ents[truncIndex+1-first:] // already covered by the snapshot
		}
		first, last := ents[0].GetIndex(), truncIndex+uint64(len(logEnts))
		if first > last+1 {
			return fmt.Errorf("%w: entries start at %d, log ends at %d", ErrLogGap, first, last)
		}
		newLast := ents[len(ents)-1].GetIndex()
		for i := newLast + 1; i <= last; i++ {
			del(i) // stale suffix not covered by the new entries
		}
		if writeHS && newHS != nil {
			// Only matters if the batch is split: a HardState that never claims
			// a commit past the entries already on disk.
			clamped := proto.Clone(newHS).(*pb.HardState)
			clamped.Commit = new(min(newHS.GetCommit(), first-1))
			rec, err := marshalRecord(clamped)
			if err != nil {
				return err
			}
			set(keyHardState, rec)
		}
		for _, e := range ents {
			rec, err := marshalRecord(e)
			if err != nil {
				return err
			}
			set(badgerlog.IndexKey(prefixEntry, e.GetIndex()), rec)
		}
		if keep := first - truncIndex - 1; keep == uint64(len(logEnts)) {
			// Appending past the end writes only beyond len, which readers
			// never look at: no copy of the log.
			logEnts = append(logEnts, ents...)
		} else {
			// Overwriting a suffix: copy, so readers holding the old slice
			// keep seeing the old entries.
			logEnts = append(logEnts[:keep:keep], ents...)
		}
	}
	if writeHS && newHS != nil {
		rec, err := marshalRecord(newHS)
		if err != nil {
			return err
		}
		set(keyHardState, rec)
	}
	for i := garbageFrom + 1; i <= garbageTo; i++ {
		del(i)
	}

	if err := badgerlog.Batch(s.db, len(ops), func(txn *badger.Txn, i int) error { return ops[i](txn) }); err != nil {
		return fmt.Errorf("raftstore: save: %w", err)
	}
	snapName := s.snapName
	if hasSnap {
		snapName = snapFileName(truncTerm, truncIndex)
		if err := removeSnapFiles(s.snapDir, snapName, truncIndex, false); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.snapName = snapName
	s.hs = newHS
	if writeHS {
		s.hsDisk, s.hsDirty = newHS, false
	} else if hasHS {
		s.hsDirty = true
	}
	s.snap, s.truncIndex, s.truncTerm, s.ents = newSnap, truncIndex, truncTerm, logEnts
	s.mu.Unlock()
	return nil
}

// CreateSnapshot records snap, a snapshot of the state machine at an applied
// index within the log, as the latest snapshot and compacts the log up to
// compactTo (capped at the snapshot's index; nothing is compacted when it is
// at or below the current compaction point), keeping the entries after it for
// followers that lag slightly.
//
// It may run on a goroutine of its own while Save goes on (etcd's server
// snapshots and compacts its raft.MemoryStorage beside the raft loop the
// same way): the snapshot's file is written and synced first without the
// writers' lock, so appends never wait behind it. Then, under the lock,
// one synced batch writes the record naming the file, the new compaction
// point and the HardState, and the file of the previous snapshot is
// deleted. A crash before that batch leaves the previous snapshot in force
// (Open deletes the unnamed file); a crash after it, the new one. The
// compacted entries are deleted after it in the background,
// badgerlog.CompactChunk per write, so that neither this call nor the
// Saves after it wait behind thousands of deletions; then badger's value
// log is garbage-collected (badgerlog.ReclaimValueLog).
//
// Errors: raft.ErrSnapOutOfDate for a snapshot not newer than the stored
// one (a snapshot from the leader may have been saved meanwhile),
// raft.ErrUnavailable for one past the log, a failure of an earlier
// background deletion, the file system's, or badger's.
func (s *Store) CreateSnapshot(snap *pb.Snapshot, compactTo uint64) error {
	if err := s.checkNewSnapshot(snap); err != nil {
		return err
	}
	if err := badgerlog.CheckSpace(s.db.Opts().Dir); err != nil {
		return err
	}
	if err := writeSnapFile(s.snapDir, snap); err != nil {
		return badgerlog.DiskFull(err)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	si, st := snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
	name := snapFileName(st, si)
	if err := s.checkNewSnapshot(snap); err != nil {
		if name != s.snapName {
			_ = os.Remove(filepath.Join(s.snapDir, name)) // Open would delete it too
		}
		return err
	}
	if err := s.compact.failed(); err != nil {
		return err
	}
	truncIndex, truncTerm := s.truncIndex, s.truncTerm
	if compactTo = min(compactTo, si); compactTo > truncIndex {
		truncIndex, truncTerm = compactTo, s.termAt(compactTo)
	}
	var ops []func(txn *badger.Txn) error
	rec, err := encodeSnapshotRecord(truncIndex, truncTerm, metadataOnly(snap))
	if err != nil {
		return err
	}
	ops = append(ops, func(txn *badger.Txn) error { return txn.Set(keySnapshot, rec) })
	newHS := s.hs
	if newHS != nil && newHS.GetCommit() < truncIndex {
		newHS = proto.Clone(newHS).(*pb.HardState)
		newHS.Commit = new(truncIndex)
	}
	if newHS != nil {
		hsRec, err := marshalRecord(newHS)
		if err != nil {
			return err
		}
		ops = append(ops, func(txn *badger.Txn) error { return txn.Set(keyHardState, hsRec) })
	}
	if err := badgerlog.Batch(s.db, len(ops), func(txn *badger.Txn, i int) error { return ops[i](txn) }); err != nil {
		return fmt.Errorf("raftstore: create snapshot %d: %w", si, err)
	}
	// The compacted entries go in the background, in bounded chunks: the
	// record above already makes them garbage (Open drops what a crash
	// leaves of them).
	s.compact.add(s, s.truncIndex, truncIndex)
	// Copy the kept tail so the compacted entries can be garbage collected.
	kept := make([]*pb.Entry, len(s.ents)-int(truncIndex-s.truncIndex))
	copy(kept, s.ents[truncIndex-s.truncIndex:])
	s.mu.Lock()
	s.hs, s.hsDisk, s.hsDirty = newHS, newHS, false
	s.snap, s.snapName, s.truncIndex, s.truncTerm, s.ents = metadataOnly(snap), name, truncIndex, truncTerm, kept
	s.mu.Unlock()
	// The older files go once the store names the new one: Snapshot reads
	// the file of the snapshot the store names, under s.mu.
	return removeSnapFiles(s.snapDir, name, si, false)
}

// checkNewSnapshot returns raft.ErrSnapOutOfDate when snap is not newer
// than the stored snapshot, and raft.ErrUnavailable when it is past the
// log's end.
func (s *Store) checkNewSnapshot(snap *pb.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	si, cur := snap.GetMetadata().GetIndex(), s.snap.GetMetadata().GetIndex()
	if si <= cur {
		return fmt.Errorf("raftstore: create snapshot %d over %d: %w", si, cur, raft.ErrSnapOutOfDate)
	}
	if last := s.lastIndex(); si > last {
		return fmt.Errorf("raftstore: create snapshot %d past last index %d: %w", si, last, raft.ErrUnavailable)
	}
	return nil
}

// Close stops the background deletion of compacted entries (Open drops
// what it leaves) and writes a HardState whose commit index Save kept in
// memory. It does not close the database.
func (s *Store) Close() error {
	s.compact.stop()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if !s.hsDirty {
		return nil
	}
	rec, err := marshalRecord(s.hs)
	if err != nil {
		return err
	}
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(keyHardState, rec) }); err != nil {
		return fmt.Errorf("raftstore: close: write hard state: %w", err)
	}
	s.mu.Lock()
	s.hsDisk, s.hsDirty = s.hs, false
	s.mu.Unlock()
	return nil
}
