package hashicorp

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/internal/badgerlog"
	"github.com/ticketd/ticketd/backends/internal/watermark"
)

// This file is the Raft log and stable store on hashicorp/raft-wal
// (Config.LogStore wal).

// walSegmentSize is the size, in bytes, of each raft-wal segment file
// (preallocated when created; the library's default is 64 MiB). Compaction
// removes whole sealed segments only, so the log on disk is at most one
// segment larger than the retained entries: at the default TrailingLogs
// (10240 entries of about 100 bytes) 16 MiB keeps the data dir small, and a
// segment still lasts seconds at tens of thousands of commits per second,
// so rotations (a seal, a meta commit, a new file) stay rare.
const walSegmentSize = 16 << 20

// walStore is the Raft log and stable store of a node whose Config.LogStore
// is backends.LogStoreWAL: github.com/hashicorp/raft-wal, HashiCorp's
// segment write-ahead log and Consul's log store, under
// backends.LogStoreDir(dataDir, BackendName, LogStoreWAL). Each StoreLogs is one
// append to the tail segment ended by a commit frame holding a CRC-32C of
// the batch, then one data sync (see dataSyncFile); every entry carries a
// CRC-32C of its own too (sealEntries); the term and vote live
// in the library's bolt meta database (wal-meta.db), written only on
// elections. raft-wal accepts only contiguous indexes (it is a
// raft.MonotonicLogStore, so hashicorp/raft deletes the whole log after
// installing a snapshot instead of leaving a gap).
//
// On reopen raft-wal drops a torn last batch (its commit frame's CRC does
// not match, so its sync never returned and it was never acknowledged), and
// equally any valid batches written after damage in the tail segment: the
// watermark (package watermark, through logHooks) is what notices that.
// Damage to an older entry is found by openWALStore's full read (verify).
//
// Safe for concurrent use (raft-wal is, and wmu orders a suffix deletion's
// watermark update against appends).
type walStore struct {
	w   *wal.WAL
	dir string
	logHooks
	wmu sync.Mutex
	// head is the first entry a compaction kept when raft-wal was not told
	// of it (0: none; see DeleteRange): entries before it are deleted as
	// far as FirstIndex and GetLog tell, still in raft-wal until a later
	// compaction frees a whole segment.
	head atomic.Uint64
	// replay holds the entries verify read until they are applied, for
	// hashicorp/raft's reads of them at start (walreplay.go).
	replay replayCache
}

var (
	_ raft.LogStore          = (*walStore)(nil)
	_ raft.StableStore       = (*walStore)(nil)
	_ raft.MonotonicLogStore = (*walStore)(nil)
)

// openWALStore opens (creating it if needed) the raft-wal log of the node
// whose data dir is dataDir. A directory holding segment files without the
// meta database that lists them is refused: raft-wal would start an empty
// log and delete the segments as leftovers. Errors: the refusal, or
// raft-wal's, saying how to recover.
func openWALStore(dataDir string, logger hclog.Logger) (*walStore, error) {
	dir := backends.LogStoreDir(dataDir, BackendName, backends.LogStoreWAL)
	if err := os.MkdirAll(dir, backends.DataDirMode); err != nil {
		return nil, fmt.Errorf("hashicorp: open raft-wal %s: %w", dir, err)
	}
	if err := checkWALMeta(dir); err != nil {
		return nil, err
	}
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(dir,
		wal.WithMetaStore(meta),
		wal.WithSegmentFiler(segment.NewFiler(dir, restrictedVFS{walfs.New()})),
		wal.WithSegmentSize(walSegmentSize),
		wal.WithLogger(logger))
	if err != nil {
		_ = meta.Close()
		return nil, fmt.Errorf("hashicorp: open raft-wal %s: %w; the raft log cannot be read, so this node refuses to start: "+
			"if a file of the data dir was lost or damaged, recover by %s", dir, err, watermark.ReplaceMember)
	}
	s := &walStore{w: w, dir: dir}
	if err := s.verify(dataDir); err != nil {
		_ = w.Close()
		return nil, err
	}
	// bolt creates wal-meta.db 0644 less the umask.
	if err := backends.RestrictTree(dir); err != nil {
		_ = w.Close()
		return nil, err
	}
	return s, nil
}

// verify reads every entry of the log once (GetLog checks each one's
// CRC, see sealEntries) and returns a *watermark.HoleError naming the first that
// cannot be read: a damaged segment file. The retained log is at most
// TrailingLogs plus one snapshot's worth of entries, read in contiguous
// ranges by up to verifyWorkers goroutines at once (each raft-wal read
// copies at least 64 KiB, so the read is CPU-bound; raft-wal reads
// concurrently). It keeps the entries it read (replay) for raft's reads at
// start; those a restored snapshot covers go as soon as it is restored
// (replayed).
func (s *walStore) verify(dataDir string) error {
	first, err := s.w.FirstIndex()
	if err != nil {
		return err
	}
	last, err := s.w.LastIndex()
	if err != nil {
		return err
	}
	if first == 0 || last < first {
		return nil
	}
	logs := make([]raft.Log, last-first+1)
	workers := uint64(min(runtime.GOMAXPROCS(0), verifyWorkers))
	chunk := (uint64(len(logs)) + workers - 1) / workers
	bad := make([]error, workers) // per range: its first unreadable entry
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := first+w*chunk, min(first+(w+1)*chunk-1, last)
		wg.Go(func() {
			for i := lo; i <= hi; i++ {
				if err := s.GetLog(i, &logs[i-first]); err != nil {
					bad[w] = &watermark.HoleError{DataDir: dataDir, What: fmt.Sprintf(
						"entry %d of its raft log (entries %d-%d in %s) cannot be read: %v", i, first, last, s.dir, err)}
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range bad { // ranges in log order: the first is the earliest entry
		if err != nil {
			return err
		}
	}
	s.replay.fill(first, logs)
	return nil
}

// verifyWorkers bounds the goroutines of verify.
const verifyWorkers = 4

// checkWALMeta refuses a raft-wal directory with segment files but no meta
// database (see openWALStore).
func checkWALMeta(dir string) error {
	segs, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil || len(segs) == 0 {
		return err
	}
	_, err = os.Stat(filepath.Join(dir, metadb.FileName))
	if errors.Is(err, fs.ErrNotExist) {
		return &watermark.HoleError{DataDir: filepath.Dir(dir), What: fmt.Sprintf(
			"%s holds %d raft-wal segment files but not %s, the list of which of them hold the log", dir, len(segs), metadb.FileName)}
	}
	if err != nil {
		return fmt.Errorf("hashicorp: open raft-wal %s: %w", dir, err)
	}
	return nil
}

// FirstIndex returns the first stored index, 0 for an empty log: raft-wal's
// first, or the first a compaction kept if that is later (DeleteRange).
func (s *walStore) FirstIndex() (uint64, error) {
	first, err := s.w.FirstIndex()
	if err != nil || first == 0 {
		return first, err
	}
	return max(first, s.head.Load()), nil
}

// LastIndex returns the last stored index, 0 for an empty log.
func (s *walStore) LastIndex() (uint64, error) { return s.w.LastIndex() }

// GetLog reads the entry at index into l, checking its CRC (errEntryChecksum,
// wrapped, for a damaged one); raft.ErrLogNotFound when index is
// outside [FirstIndex, LastIndex]. raft-wal itself still returns entries
// that a head truncation left in the tail segment's file; the LogStore
// contract is that a deleted entry is not found. An entry verify read and
// the node has not applied yet comes from memory (replay), already checked.
func (s *walStore) GetLog(index uint64, l *raft.Log) error {
	first, err := s.FirstIndex()
	if err != nil {
		return err
	}
	if first == 0 || index < first {
		return raft.ErrLogNotFound
	}
	if s.replay.get(index, l) {
		return nil
	}
	if err := s.w.GetLog(index, l); err != nil {
		return err
	}
	return openEntry(l)
}

// replayed drops the entries up to index from the replay cache: applied,
// or covered by a restored snapshot.
func (s *walStore) replayed(index uint64) { s.replay.dropApplied(index) }

// StoreLog stores one entry durably.
func (s *walStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs appends logs durably in one batch (one data sync), after
// checking that the file system keeps badgerlog.ReserveBytes free (a full
// disk stops the node with badgerlog.ErrDiskFull while a segment can still
// be sealed and rotated), then records the new end in the watermark.
func (s *walStore) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	defer s.timed(len(logs), time.Now())
	first, last := logs[0].Index, logs[len(logs)-1].Index
	s.replay.drop(first, math.MaxUint64) // what follows first is being replaced
	if err := badgerlog.CheckSpace(s.dir); err != nil {
		return s.failed(fmt.Errorf("raft-wal: store logs [%d,%d]: %w", first, last, err))
	}
	if err := s.w.StoreLogs(sealEntries(logs)); err != nil {
		return s.failed(fmt.Errorf("raft-wal: store logs [%d,%d]: %w", first, last, err))
	}
	return s.advance(last)
}

// DeleteRange deletes the entries from `from` to `to`, both inclusive:
// a prefix (compaction after a snapshot) or a suffix (a follower dropping
// conflicting entries; the whole log after a snapshot install), the only
// ranges raft-wal accepts.
//
// A prefix that leaves entries after it is deleted in memory first (head):
// raft-wal is told only once the prefix covers a whole sealed segment, the
// only thing its head truncation frees on disk. Telling it on every
// compaction would hold raft-wal's write lock, which every StoreLogs
// takes, across a commit of its bolt meta database (two syncs) per
// snapshot: an append stalled behind each compaction (Raft thesis §5.1:
// compaction must not stop normal operation). Entries deleted in memory
// are committed entries a snapshot covers; after a restart they are
// back in the log, older entries raft never reads before it compacts
// again.
//
// Before a suffix goes the watermark is lowered durably to what remains,
// so a crash during the deletion never leaves it past the log's end.
func (s *walStore) DeleteRange(from, to uint64) error {
	s.replay.drop(from, to)
	// Read before the lock appends take: the directory read is only a
	// hint (a segment sealed meanwhile is found by the next compaction).
	below := s.segmentBelow(to + 1)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	stored, err := s.w.FirstIndex()
	if err != nil {
		return err
	}
	first, err := s.FirstIndex()
	if err != nil {
		return err
	}
	last, err := s.w.LastIndex()
	if err != nil {
		return err
	}
	lo := max(from, first)
	if last == 0 || lo > min(to, last) {
		return nil
	}
	if from <= first && to < last {
		s.head.Store(to + 1)
		if !below {
			return nil
		}
		if err := s.w.DeleteRange(stored, to); err != nil {
			return s.failed(fmt.Errorf("raft-wal: delete logs [%d,%d]: %w", stored, to, err))
		}
		return nil
	}
	if to >= last && lo > 0 {
		if err := s.mark(lo - 1); err != nil {
			return err
		}
	}
	if from <= first {
		// The whole log: what raft-wal still holds before head too.
		from = stored
		s.head.Store(0)
	}
	if err := s.w.DeleteRange(from, to); err != nil {
		return s.failed(fmt.Errorf("raft-wal: delete logs [%d,%d]: %w", from, to, err))
	}
	return nil
}

// segmentBelow reports whether a segment file of the log holds only
// entries before index: one followed by a segment whose first entry is at
// or before index (raft-wal names each segment file by its first index,
// segmentFileName). A directory it cannot read counts as yes, so raft-wal
// is told and reports the problem.
func (s *walStore) segmentBelow(index uint64) bool {
	names, err := filepath.Glob(filepath.Join(s.dir, "*.wal"))
	if err != nil {
		return true
	}
	var bases []uint64
	for _, name := range names {
		var base, id uint64
		if _, err := fmt.Sscanf(filepath.Base(name), segmentFileName, &base, &id); err == nil {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	return len(bases) > 1 && bases[1] <= index
}

// segmentFileName is how raft-wal names a segment file: its first index
// and its id (raft-wal's segment.Filer).
const segmentFileName = "%020d-%016x.wal"

// IsMonotonic reports that the store accepts only contiguous indexes
// (raft.MonotonicLogStore).
func (s *walStore) IsMonotonic() bool { return true }

// Set stores val under key durably (a bolt commit in wal-meta.db), unless
// it is stored already (as logStore.Set). The commit does not check the
// reserve (badgerlog.CheckSpace): bolt writes its pages with pwrite(2),
// so a disk with no space left fails the commit with an error. A failed
// write stops the node (stableFailed).
func (s *walStore) Set(key, val []byte) error {
	if cur, err := s.w.Get(key); err == nil && cur != nil && bytes.Equal(cur, val) {
		return nil
	}
	if err := s.w.Set(key, val); err != nil {
		return s.stableFailed(fmt.Errorf("raft-wal: set %q: %w", key, err))
	}
	return nil
}

// Get returns the value stored under key, nil (and a nil error) when none is.
func (s *walStore) Get(key []byte) ([]byte, error) { return s.w.Get(key) }

// SetUint64 stores val under key durably, unless GetUint64 returns val
// already (a missing key reads as 0). A failed write stops the node
// (stableFailed).
func (s *walStore) SetUint64(key []byte, val uint64) error {
	if cur, err := s.w.GetUint64(key); err == nil && cur == val {
		return nil
	}
	if err := s.w.SetUint64(key, val); err != nil {
		return s.stableFailed(fmt.Errorf("raft-wal: set %q: %w", key, err))
	}
	return nil
}

// GetUint64 returns the value SetUint64 stored under key, 0 when none is.
func (s *walStore) GetUint64(key []byte) (uint64, error) { return s.w.GetUint64(key) }

// Close tells raft-wal of a compaction it was not told of (DeleteRange),
// so a reopened log starts where this one did, and closes the log's files
// and its meta database.
func (s *walStore) Close() error {
	s.wmu.Lock()
	var err error
	if head := s.head.Load(); head > 0 {
		if stored, ferr := s.w.FirstIndex(); ferr != nil {
			err = ferr
		} else if stored > 0 && stored < head {
			err = s.w.DeleteRange(stored, head-1)
		}
	}
	s.wmu.Unlock()
	return errors.Join(err, s.w.Close())
}

// restrictedVFS is raft-wal's file system with the data dir's modes and
// data syncs: a new segment file is made backends.DataFileMode at once
// (raft-wal creates it 0644 less the umask), and every segment file opened
// for writing syncs with fdatasync (dataSyncFile).
type restrictedVFS struct{ *walfs.FS }

func (v restrictedVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.FS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(filepath.Join(dir, name), backends.DataFileMode); err != nil {
		_ = f.Close()
		return nil, err
	}
	return dataSync(f, dir), nil
}

func (v restrictedVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.FS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return dataSync(f, ""), nil
}
