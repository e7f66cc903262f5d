// Package walstore is the etcd backend's durable Raft state in etcd's own
// write-ahead log (go.etcd.io/etcd/server/v3/storage/wal) and snapshot
// files (etcdserver/api/snap), with raft.MemoryStorage serving raft's reads,
// as etcd's server and its contrib/raftexample pair them: the backend's
// `wal` log store (backends.LogStoreWAL). It offers the same calls as
// package raftstore (the badger store), so the node uses either.
//
// Layout under <data-dir>/wal-etcd: wal/ (the WAL's segments, 16 MiB,
// preallocated; every record carries a CRC chained over the records
// before it), snap/ (one file per snapshot, with a CRC), peers (the
// backend's address book, with a CRC-32C).
//
// On open the WAL is read from the newest snapshot its records name and
// that is on disk: a torn last record (a crash mid-write, never
// acknowledged: the WAL syncs before Save returns) is cut off with
// wal.Repair, as etcd's server does; any other damage (a CRC mismatch
// before the last record, a missing segment in the middle) is an error.
package walstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/internal/badgerlog"
)

// Sentinel errors of package walstore.
var (
	// ErrLogGap: Save was given entries that start after the log's end.
	ErrLogGap = errors.New("walstore: entries leave a gap after the log")
	// ErrCorrupt: the peers file does not match its CRC.
	ErrCorrupt = errors.New("walstore: damaged record")
)

// keepSnapshots is how many snapshot files stay in snap/ after a new one,
// at most: an older one stays only while the WAL still holds the entries
// after it (release), since only then can Open start from it should the
// newest file be unreadable (snap.Snapshotter.LoadNewestAvailable falls
// back to it).
const keepSnapshots = 2

// segmentBytes is the size of the WAL's segments (bytes), preallocated,
// as raft-wal's on the hashicorp backend, instead of etcd's 64 MiB
// default: a data dir holds the segment being written, the next one
// (preallocated ahead) and one partly compacted, so the segment size is
// paid about three times over whatever the table. Any segment size reads
// back: etcd's WAL finds records by their frames, not by offsets.
const segmentBytes = 16 << 20

// segmentSize sets etcd's WAL segment size (a package variable of
// go.etcd.io/etcd/server/v3/storage/wal) to segmentBytes, once per
// process, before the first WAL is created or opened, so no WAL that
// reads it is running when it changes. Only processes that open a Store
// change it (ticketbench's embedded etcd peer runs in a process that
// opens none).
var segmentSize sync.Once

func useSegmentSize() { segmentSize.Do(func() { wal.SegmentSizeBytes = segmentBytes }) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Store is a raft.Storage (its embedded MemoryStorage) whose writes go to
// etcd's WAL and snapshot files first. Safe for concurrent use: raft
// reads while the node's loop writes.
//
// The MemoryStorage holds the latest snapshot's metadata only: its Data,
// the whole lock table encoded (tens of MB at a million locks), is read
// back from its file by Snapshot, the one call that returns it (raft
// sends it to a follower behind the log's start; the node restores from it
// at start), rather than kept in memory between snapshots
// (docs/benchmarks.md#scale-a-million-locks, what a lock costs in memory).
type Store struct {
	*raft.MemoryStorage
	lg             *zap.Logger
	dir            string // <data-dir>/wal-etcd
	walDir, snapDr string
	w              *wal.WAL
	ss             *snap.Snapshotter

	mu    sync.Mutex // guards peers and the writes
	peers []byte
}

// Open opens (creating it if needed) the store in dir. Errors: the WAL's or
// the snapshot files' (wrapped), ErrCorrupt for a damaged peers file.
func Open(dir string, lg *zap.Logger) (*Store, error) {
	if lg == nil {
		lg = zap.NewNop()
	}
	useSegmentSize()
	s := &Store{MemoryStorage: raft.NewMemoryStorage(), lg: lg, dir: dir,
		walDir: filepath.Join(dir, "wal"), snapDr: filepath.Join(dir, "snap")}
	for _, d := range []string{dir, s.snapDr} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("walstore: %w", err)
		}
	}
	s.ss = snap.New(lg, s.snapDr)
	if err := s.loadPeers(); err != nil {
		return nil, err
	}
	if !wal.Exist(s.walDir) {
		w, err := wal.Create(lg, s.walDir, nil)
		if err != nil {
			return nil, fmt.Errorf("walstore: create wal: %w", err)
		}
		// wal.Create fsyncs the first segment and the WAL directory's
		// parent after renaming the directory into place, but never the
		// directory itself, so the segment's name is not durable until
		// the WAL cuts its next segment (fsync(2)): a power cut before
		// that would take every entry in it.
		if err := backends.SyncDir(s.walDir); err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("walstore: create wal: %w", err)
		}
		s.w = w
		return s, nil
	}
	walSnaps, err := wal.ValidSnapshotEntries(lg, s.walDir)
	if err != nil {
		return nil, fmt.Errorf("walstore: read wal snapshots: %w", err)
	}
	sn, err := s.ss.LoadNewestAvailable(walSnaps)
	if err != nil && !errors.Is(err, snap.ErrNoSnapshot) {
		return nil, fmt.Errorf("walstore: load snapshot: %w", err)
	}
	walSnap := &walpb.Snapshot{Index: new(uint64(0)), Term: new(uint64(0))}
	if sn != nil {
		md := sn.GetMetadata()
		walSnap = &walpb.Snapshot{Index: new(md.GetIndex()), Term: new(md.GetTerm()), ConfState: md.GetConfState()}
		if err := s.ApplySnapshot(withoutData(sn)); err != nil {
			return nil, fmt.Errorf("walstore: snapshot %d: %w", md.GetIndex(), err)
		}
	}
	for repaired := false; ; repaired = true {
		w, err := wal.Open(lg, s.walDir, walSnap)
		if err != nil {
			return nil, fmt.Errorf("walstore: open wal: %w", err)
		}
		_, hs, ents, err := w.ReadAll()
		if err == nil {
			s.w = w
			if !raft.IsEmptyHardState(hs) {
				if err := s.SetHardState(hs); err != nil {
					_ = w.Close()
					return nil, err
				}
			}
			if err := s.Append(ents); err != nil {
				_ = w.Close()
				return nil, err
			}
			return s, nil
		}
		_ = w.Close()
		// A torn last record was never acknowledged: cut it off once.
		if repaired || !errors.Is(err, io.ErrUnexpectedEOF) || !wal.Repair(lg, s.walDir) {
			return nil, fmt.Errorf("walstore: read wal: %w", err)
		}
		lg.Warn("cut off a torn last record of the raft write-ahead log (a crash during a write)", zap.String("dir", s.walDir))
	}
}

// IsEmpty reports whether the store holds no HardState, entry or snapshot.
func (s *Store) IsEmpty() bool {
	hs, _, _ := s.InitialState()
	last, _ := s.LastIndex()
	sn, _ := s.MemoryStorage.Snapshot()
	return raft.IsEmptyHardState(hs) && last == 0 && raft.IsEmptySnap(sn)
}

// Save makes hs, ents and snap durable (one WAL sync when the term, the
// vote or the log changes; a commit index alone is written without one,
// Raft thesis §3.8) and then visible to raft: snap first (its file, then
// its WAL record), then the entries, which overwrite the log from their
// first index. Errors: raft.ErrSnapOutOfDate, ErrLogGap,
// badgerlog.ErrDiskFull, or the WAL's; on error the node must stop.
func (s *Store) Save(hs *pb.HardState, ents []*pb.Entry, sn *pb.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := badgerlog.DiskFull(s.save(hs, ents, sn)); err != nil {
		return err
	}
	return nil
}

// save is Save's work; s.mu is held. Before anything is written it checks
// that the file system keeps badgerlog.ReserveBytes free, so a full disk
// stops the node (badgerlog.ErrDiskFull) while the WAL can still cut a
// segment.
func (s *Store) save(hs *pb.HardState, ents []*pb.Entry, sn *pb.Snapshot) error {
	if len(ents) > 0 || !raft.IsEmptySnap(sn) {
		if err := badgerlog.CheckSpace(s.dir); err != nil {
			return err
		}
	}
	if !raft.IsEmptySnap(sn) {
		cur, _ := s.MemoryStorage.Snapshot()
		if sn.GetMetadata().GetIndex() <= cur.GetMetadata().GetIndex() {
			return fmt.Errorf("walstore: save snapshot %d over %d: %w", sn.GetMetadata().GetIndex(), cur.GetMetadata().GetIndex(), raft.ErrSnapOutOfDate)
		}
		if err := s.saveSnap(sn); err != nil {
			return err
		}
		if err := s.ApplySnapshot(withoutData(sn)); err != nil {
			return err
		}
	}
	if len(ents) > 0 {
		last, _ := s.LastIndex()
		if first := ents[0].GetIndex(); first > last+1 {
			return fmt.Errorf("%w: entries start at %d, log ends at %d", ErrLogGap, first, last)
		}
	}
	if err := s.w.Save(hs, ents); err != nil {
		return fmt.Errorf("walstore: save: %w", err)
	}
	if len(ents) > 0 {
		if err := s.Append(ents); err != nil {
			return err
		}
	}
	if !raft.IsEmptyHardState(hs) {
		if err := s.SetHardState(hs); err != nil {
			return err
		}
	}
	if !raft.IsEmptySnap(sn) {
		return s.release(sn.GetMetadata().GetIndex())
	}
	return nil
}

// CreateSnapshot records sn, a snapshot of the state machine at an applied
// index within the log, as the latest snapshot (its file, then its WAL
// record) and compacts the in-memory log up to compactTo (capped at the
// snapshot's index); WAL segments wholly before the snapshot and snapshot
// files no longer of use are deleted (release).
//
// It may run on a goroutine of its own while Save goes on (etcd's server
// snapshots beside its raft loop the same way): the snapshot file, the
// slow part, is written and synced without the lock Save takes; the WAL
// record, the compaction and the purge follow under it. A crash before
// the record leaves a file no WAL record names, which Open skips
// (snap.Snapshotter.LoadNewestAvailable) and the next purge deletes.
// Errors: raft.ErrSnapOutOfDate (a snapshot from the leader may have been
// saved meanwhile), raft.ErrUnavailable, badgerlog.ErrDiskFull, or the
// WAL's.
func (s *Store) CreateSnapshot(sn *pb.Snapshot, compactTo uint64) error {
	md := sn.GetMetadata()
	if err := s.checkNewSnapshot(md.GetIndex()); err != nil {
		return err
	}
	if err := badgerlog.CheckSpace(s.dir); err != nil {
		return err
	}
	if err := s.saveSnapFile(sn); err != nil {
		return badgerlog.DiskFull(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkNewSnapshot(md.GetIndex()); err != nil {
		return err // its file is older than the one in force: the next purge deletes it
	}
	if _, err := s.MemoryStorage.CreateSnapshot(md.GetIndex(), md.GetConfState(), nil); err != nil {
		return fmt.Errorf("walstore: create snapshot %d: %w", md.GetIndex(), err)
	}
	if err := s.saveSnapRecord(md); err != nil {
		return err
	}
	if first, _ := s.FirstIndex(); compactTo >= first {
		if err := s.Compact(min(compactTo, md.GetIndex())); err != nil && !errors.Is(err, raft.ErrCompacted) {
			return err
		}
	}
	return s.release(md.GetIndex())
}

// checkNewSnapshot returns raft.ErrSnapOutOfDate when index is not past
// the snapshot in force, and raft.ErrUnavailable when it is past the log
// (MemoryStorage.CreateSnapshot would panic).
func (s *Store) checkNewSnapshot(index uint64) error {
	cur, _ := s.MemoryStorage.Snapshot()
	if ci := cur.GetMetadata().GetIndex(); index <= ci {
		return fmt.Errorf("walstore: create snapshot %d over %d: %w", index, ci, raft.ErrSnapOutOfDate)
	}
	if last, _ := s.LastIndex(); index > last {
		return fmt.Errorf("walstore: create snapshot %d past the log's end %d: %w", index, last, raft.ErrUnavailable)
	}
	return nil
}

// Snapshot implements raft.Storage: the latest snapshot (index 0 when there
// is none), its Data read from its file, which stays on disk at least until
// the next snapshot is recorded (release keeps the newest keepSnapshots).
// The returned snapshot is the caller's. Errors: the file's (missing,
// damaged: snap.Read checks its CRC).
func (s *Store) Snapshot() (*pb.Snapshot, error) {
	s.mu.Lock() // no snapshot is recorded, nor file purged, meanwhile
	defer s.mu.Unlock()
	sn, err := s.MemoryStorage.Snapshot()
	if err != nil || raft.IsEmptySnap(sn) {
		return sn, err
	}
	md := sn.GetMetadata()
	full, err := snap.Read(s.lg, filepath.Join(s.snapDr, snapFileName(md)))
	if err != nil {
		return nil, fmt.Errorf("walstore: read snapshot %d: %w", md.GetIndex(), err)
	}
	if full.GetMetadata().GetIndex() != md.GetIndex() || full.GetMetadata().GetTerm() != md.GetTerm() {
		return nil, fmt.Errorf("walstore: snapshot file %s holds index %d term %d", snapFileName(md), full.GetMetadata().GetIndex(), full.GetMetadata().GetTerm())
	}
	return full, nil
}

// snapFileName is the name snap.Snapshotter gives the file of the snapshot
// md describes: term and index in 16 hex digits each.
func snapFileName(md *pb.SnapshotMetadata) string {
	return fmt.Sprintf("%016x-%016x.snap", md.GetTerm(), md.GetIndex())
}

// withoutData is sn's metadata, for the MemoryStorage (see Store).
func withoutData(sn *pb.Snapshot) *pb.Snapshot { return &pb.Snapshot{Metadata: sn.GetMetadata()} }

// saveSnap writes sn's file, then its WAL record (etcd's order: a WAL
// snapshot record always has its file).
func (s *Store) saveSnap(sn *pb.Snapshot) error {
	if err := s.saveSnapFile(sn); err != nil {
		return err
	}
	return s.saveSnapRecord(sn.GetMetadata())
}

// saveSnapFile writes sn's file durably: snap.Snapshotter syncs the file
// but not the directory naming it, and the WAL record that names the
// file must never outlive it.
func (s *Store) saveSnapFile(sn *pb.Snapshot) error {
	if err := s.ss.SaveSnap(sn); err != nil {
		return fmt.Errorf("walstore: save snapshot file: %w", err)
	}
	if err := backends.SyncDir(s.snapDr); err != nil {
		return fmt.Errorf("walstore: %w", err)
	}
	return nil
}

// saveSnapRecord writes the WAL record of the snapshot md describes, whose
// file is durable already.
func (s *Store) saveSnapRecord(md *pb.SnapshotMetadata) error {
	ws := &walpb.Snapshot{Index: new(md.GetIndex()), Term: new(md.GetTerm()), ConfState: md.GetConfState()}
	if err := s.w.SaveSnapshot(ws); err != nil {
		return fmt.Errorf("walstore: save snapshot record: %w", err)
	}
	return nil
}

// release lets the WAL drop its segments before index and deletes them,
// then the snapshot files older than the newest keepSnapshots and those
// older than the WAL's first segment: with the entries after it gone, such
// a file can never be restarted from (wal.Open finds no segment to read
// after it), and at a large table it is as big as the table. A segment the
// WAL still holds locked is never deleted (etcd's fileutil.PurgeFile).
func (s *Store) release(index uint64) error {
	if err := s.w.ReleaseLockTo(index); err != nil {
		return fmt.Errorf("walstore: release wal: %w", err)
	}
	segs, err := names(s.walDir, ".wal")
	if err != nil {
		return err
	}
	for _, name := range segs {
		path := filepath.Join(s.walDir, name)
		l, err := fileutil.TryLockFile(path, os.O_WRONLY, fileutil.PrivateFileMode)
		if err != nil {
			break // held by the WAL: it and every later one are still needed
		}
		err = os.Remove(path)
		_ = l.Close()
		if err != nil {
			return fmt.Errorf("walstore: purge %s: %w", path, err)
		}
	}
	walFrom, err := firstSegmentIndex(s.walDir)
	if err != nil {
		return err
	}
	snaps, err := names(s.snapDr, ".snap")
	if err != nil {
		return err
	}
	for i, name := range snaps {
		newest := i == len(snaps)-1
		var term, at uint64
		_, perr := fmt.Sscanf(name, "%016x-%016x.snap", &term, &at)
		unreachable := perr == nil && at < walFrom
		if newest || (i >= len(snaps)-keepSnapshots && !unreachable) {
			continue
		}
		if err := os.Remove(filepath.Join(s.snapDr, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("walstore: purge snapshot %s: %w", name, err)
		}
	}
	return nil
}

// firstSegmentIndex is the index in the name of the WAL's first segment
// in dir ("<seq>-<index>.wal", both 16 hex digits: the first index the
// segment may hold), 0 when there is none or its name is not of that
// form. wal.Open can start from a snapshot at index i only if a segment's
// index is at most i.
func firstSegmentIndex(dir string) (uint64, error) {
	segs, err := names(dir, ".wal")
	if err != nil || len(segs) == 0 {
		return 0, err
	}
	var seq, index uint64
	if _, err := fmt.Sscanf(segs[0], "%016x-%016x.wal", &seq, &index); err != nil {
		return 0, nil
	}
	return index, nil
}

// names lists the files of dir ending in ext, in name order (oldest first:
// both the WAL's and the snapshots' names are zero-padded hex numbers).
func names(dir, ext string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("walstore: %w", err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ext) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// Peers returns the address book last saved (nil: none).
func (s *Store) Peers() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peers
}

// SavePeers durably replaces the address book with data (a file of its own:
// 4 bytes of CRC-32C, then data; backends.WriteFileDurably).
func (s *Store) SavePeers(data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := binary.BigEndian.AppendUint32(nil, crc32.Checksum(data, castagnoli))
	rec = append(rec, data...)
	if err := backends.WriteFileDurably(filepath.Join(s.dir, "peers"), rec); err != nil {
		return fmt.Errorf("walstore: save peers: %w", err)
	}
	s.peers = bytes.Clone(data)
	return nil
}

func (s *Store) loadPeers() error {
	b, err := os.ReadFile(filepath.Join(s.dir, "peers"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("walstore: read peers: %w", err)
	}
	if len(b) < 4 || crc32.Checksum(b[4:], castagnoli) != binary.BigEndian.Uint32(b) {
		return fmt.Errorf("%w: %s", ErrCorrupt, filepath.Join(s.dir, "peers"))
	}
	s.peers = b[4:]
	return nil
}

// Close writes the latest HardState (its commit index may have been kept
// in memory only) and closes the WAL, which syncs it.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	hs, _, _ := s.InitialState()
	var err error
	if !raft.IsEmptyHardState(hs) {
		err = s.w.Save(hs, nil)
	}
	return errors.Join(err, s.w.Close())
}
