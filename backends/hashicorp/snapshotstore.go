package hashicorp

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/internal/badgerlog"
)

// This file is the snapshot store: hashicorp's FileSnapshotStore layout
// (<DataDir>/snapshots/<term>-<index>-<ms>/ holding meta.json and
// state.bin), read, listed and pruned by FileSnapshotStore itself and
// written by a sink of ours that makes a snapshot durable with four syncs
// where FileSnapshotStore's takes five and ours around it took six.

// Names and checksum of FileSnapshotStore's layout (hashicorp/raft
// file_snapshot.go), which reads what snapshotSink writes.
const (
	snapshotMetaFile  = "meta.json"
	snapshotStateFile = "state.bin"
	snapshotTmpSuffix = ".tmp"
)

var snapshotCRCTable = crc64.MakeTable(crc64.ECMA)

// snapshotFileMeta is meta.json as FileSnapshotStore encodes and decodes
// it: the snapshot's metadata and the CRC-64 (ECMA) of state.bin.
type snapshotFileMeta struct {
	raft.SnapshotMeta
	CRC []byte
}

// snapshotStore is the node's raft.SnapshotStore. List, Open and the
// retention of snapshotRetain snapshots are FileSnapshotStore's; Create
// returns a snapshotSink. Every directory and file it creates has
// backends.DataDirMode or backends.DataFileMode from the start.
type snapshotStore struct {
	*raft.FileSnapshotStore
	dataDir string
	dir     string // badgerlog.SnapshotDir(dataDir)
	// syncs counts the file and directory syncs the store's sinks made:
	// four per completed snapshot (snapshotSink.Close).
	syncs atomic.Uint64
}

// newSnapshotStore returns the snapshot store under
// <dataDir>/snapshots, keeping retain snapshots, and brings the modes of
// what is already there to the data dir's (FileSnapshotStore creates its
// directory 0755).
func newSnapshotStore(dataDir string, retain int, logger hclog.Logger) (*snapshotStore, error) {
	fs, err := raft.NewFileSnapshotStoreWithLogger(dataDir, retain, logger)
	if err != nil {
		return nil, err
	}
	if err := backends.RestrictTree(dataDir); err != nil {
		return nil, err
	}
	return &snapshotStore{FileSnapshotStore: fs, dataDir: dataDir, dir: badgerlog.SnapshotDir(dataDir)}, nil
}

// Create starts a snapshot of the state at index (term) with the given
// committed configuration: a directory <term>-<index>-<ms>.tmp holding
// state.bin, which the sink's Write fills. Only version 1 snapshots are
// written, as FileSnapshotStore; the legacy peer list of version 0
// (SnapshotMeta.Peers) is left empty: raft reads the configuration of a
// version 1 snapshot, never its peer list.
func (s *snapshotStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	if version != 1 {
		return nil, fmt.Errorf("hashicorp: snapshot version %d: only version 1 is written", version)
	}
	id := fmt.Sprintf("%d-%d-%d", term, index, time.Now().UnixMilli()) // FileSnapshotStore's snapshotName
	tmp := filepath.Join(s.dir, id+snapshotTmpSuffix)
	if err := os.MkdirAll(tmp, backends.DataDirMode); err != nil {
		return nil, fmt.Errorf("hashicorp: snapshot %s: %w", id, err)
	}
	f, err := os.OpenFile(filepath.Join(tmp, snapshotStateFile), os.O_RDWR|os.O_CREATE|os.O_TRUNC, backends.DataFileMode)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("hashicorp: snapshot %s: %w", id, err)
	}
	sink := &snapshotSink{store: s, tmp: tmp, state: f, crc: crc64.New(snapshotCRCTable)}
	sink.meta.SnapshotMeta = raft.SnapshotMeta{
		Version: version, ID: id, Index: index, Term: term,
		Configuration: configuration, ConfigurationIndex: configurationIndex,
	}
	sink.buf = bufio.NewWriter(io.MultiWriter(f, sink.crc))
	return sink, nil
}

// sync syncs f (a file's data and size, or a directory's entries) and
// counts it.
func (s *snapshotStore) sync(f *os.File) error {
	s.syncs.Add(1)
	return f.Sync()
}

// syncDir syncs the entries of directory dir (fsync(2) of the directory).
func (s *snapshotStore) syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = s.sync(d)
	return errors.Join(err, d.Close())
}

// snapshotSink writes one snapshot. Close makes it durable with four
// syncs, each needed for a power cut never to leave a snapshot that raft
// would restore incomplete, or lose one after raft compacted the log
// entries it stands for (raft compacts only after Close returns):
//
//  1. state.bin, once written;
//  2. meta.json, written once with state.bin's size and CRC (FileSnapshotStore
//     writes it twice, synced both times, the first without them);
//  3. the .tmp directory, so the names of both files are durable before
//     the directory takes its final name (FileSnapshotStore leaves this out);
//  4. the snapshots directory, after the rename, so the final name is.
//
// etcd's snapshotter does the same for its single file: the file's sync
// and its directory's.
type snapshotSink struct {
	store  *snapshotStore
	tmp    string // the .tmp directory
	state  *os.File
	crc    hash.Hash64
	buf    *bufio.Writer
	meta   snapshotFileMeta
	closed bool
}

// ID returns the snapshot's id, which Open takes once Close returned.
func (k *snapshotSink) ID() string { return k.meta.ID }

// Write appends p to state.bin.
func (k *snapshotSink) Write(p []byte) (int, error) { return k.buf.Write(p) }

// Close makes the snapshot durable and visible under its final name, then
// removes the snapshots past retention. A failed Close leaves no snapshot
// (its .tmp directory is removed). hashicorp/raft calls Close after
// FSMSnapshot.Persist, which closes the sink itself: a second Close does
// nothing.
func (k *snapshotSink) Close() error {
	if k.closed {
		return nil
	}
	k.closed = true
	if err := k.finish(); err != nil {
		_ = os.RemoveAll(k.tmp)
		return fmt.Errorf("hashicorp: snapshot %s: %w", k.meta.ID, err)
	}
	final := filepath.Join(k.store.dir, k.meta.ID)
	if err := os.Rename(k.tmp, final); err != nil {
		_ = os.RemoveAll(k.tmp)
		return fmt.Errorf("hashicorp: snapshot %s: %w", k.meta.ID, err)
	}
	if err := k.store.syncDir(k.store.dir); err != nil {
		return fmt.Errorf("hashicorp: snapshot %s: %w", k.meta.ID, err)
	}
	if err := k.store.ReapSnapshots(); err != nil {
		return fmt.Errorf("hashicorp: snapshot %s: remove old snapshots: %w", k.meta.ID, err)
	}
	// Badger creates its files 0644 less the umask: bring those created
	// since the last snapshot to the data dir's modes (a walk of a few
	// files; nothing to change on the wal store).
	return backends.RestrictTree(k.store.dataDir)
}

// finish syncs state.bin, writes meta.json and syncs it, and syncs the
// .tmp directory holding both.
func (k *snapshotSink) finish() error {
	err := k.buf.Flush()
	if err == nil {
		err = k.store.sync(k.state)
	}
	var size int64
	if err == nil {
		size, err = k.state.Seek(0, io.SeekCurrent)
	}
	if cerr := k.state.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	k.meta.Size, k.meta.CRC = size, k.crc.Sum(nil)
	if err := k.writeMeta(); err != nil {
		return err
	}
	return k.store.syncDir(k.tmp)
}

// writeMeta writes meta.json as FileSnapshotStore does (JSON of
// snapshotFileMeta) and syncs it.
func (k *snapshotSink) writeMeta() error {
	f, err := os.OpenFile(filepath.Join(k.tmp, snapshotMetaFile), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, backends.DataFileMode)
	if err != nil {
		return err
	}
	err = json.NewEncoder(f).Encode(&k.meta)
	if err == nil {
		err = k.store.sync(f)
	}
	return errors.Join(err, f.Close())
}

// Cancel abandons the snapshot: its .tmp directory is removed.
func (k *snapshotSink) Cancel() error {
	if k.closed {
		return nil
	}
	k.closed = true
	return errors.Join(k.state.Close(), os.RemoveAll(k.tmp))
}
