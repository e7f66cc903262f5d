package raftstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/ticketd/ticketd/backends"
)

// Snapshot files. A snapshot's Data is kept in a file of its own under the
// store's snapshot directory, not in badger: badger puts a value above its
// ValueThreshold (1 MiB) in its value log and never reclaims a superseded
// one by itself, so a table of a million locks grew the data dir by a
// ~37 MB snapshot per snapshot, for ever. A file is deleted as soon as a
// newer snapshot's record is durable (etcd's snap directory and
// hashicorp's FileSnapshotStore keep snapshots as files the same way).
//
// A file is named <term>-<index>.snap (16 hex digits each, etcd's snap
// naming) and holds marshalRecord of the whole raftpb.Snapshot: a CRC-32C,
// then the message. The badger record under keySnapshot holds the
// compaction point and the snapshot without Data; its index and term name
// the file.
const (
	snapSuffix = ".snap"
	tmpSuffix  = ".tmp" // a file backends.WriteFileDurably has not renamed yet
)

// snapFileName returns the name of the file of the snapshot at index, term.
func snapFileName(term, index uint64) string {
	return fmt.Sprintf("%016x-%016x%s", term, index, snapSuffix)
}

// parseSnapFileName returns the index a snapshot file name (snapFileName)
// encodes; ok is false for any other name.
func parseSnapFileName(name string) (index uint64, ok bool) {
	base, isSnap := strings.CutSuffix(name, snapSuffix)
	termHex, indexHex, found := strings.Cut(base, "-")
	if !isSnap || !found || len(termHex) != 16 || len(indexHex) != 16 {
		return 0, false
	}
	if _, err := strconv.ParseUint(termHex, 16, 64); err != nil {
		return 0, false
	}
	index, err := strconv.ParseUint(indexHex, 16, 64)
	return index, err == nil
}

// metadataOnly returns snap without its Data: what the badger record keeps.
func metadataOnly(snap *pb.Snapshot) *pb.Snapshot {
	return &pb.Snapshot{Metadata: snap.GetMetadata()}
}

// writeSnapFile writes snap to its file under dir, durably
// (backends.WriteFileDurably: a crash leaves no file or the whole one);
// dir is created (backends.DataDirMode) when missing. Errors wrap the file
// system's (badgerlog.DiskFull tells a full disk).
func writeSnapFile(dir string, snap *pb.Snapshot) error {
	md := snap.GetMetadata()
	rec, err := marshalRecord(snap)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, backends.DataDirMode); err != nil {
		return fmt.Errorf("raftstore: snapshot dir: %w", err)
	}
	if err := backends.WriteFileDurably(filepath.Join(dir, snapFileName(md.GetTerm(), md.GetIndex())), rec); err != nil {
		return fmt.Errorf("raftstore: write snapshot file: %w", err)
	}
	return nil
}

// readSnapFile reads the file under dir of the snapshot that meta (a
// record without Data) describes and verifies it: its checksum, and that it
// is the snapshot meta names. Errors wrap ErrCorrupt, for a missing file
// too: the log was compacted behind it, so nothing can replace it.
func readSnapFile(dir string, meta *pb.Snapshot) (*pb.Snapshot, error) {
	md := meta.GetMetadata()
	path := filepath.Join(dir, snapFileName(md.GetTerm(), md.GetIndex()))
	rec, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: snapshot file %s, which the log was compacted behind, is missing", ErrCorrupt, path)
	}
	if err != nil {
		return nil, fmt.Errorf("raftstore: read snapshot file: %w", err)
	}
	snap := &pb.Snapshot{}
	if err := unmarshalRecord("snapshot file "+path, rec, snap); err != nil {
		return nil, err
	}
	if got := snap.GetMetadata(); got.GetIndex() != md.GetIndex() || got.GetTerm() != md.GetTerm() {
		return nil, fmt.Errorf("%w: snapshot file %s holds the snapshot at index %d term %d, want index %d term %d",
			ErrCorrupt, path, snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm(), md.GetIndex(), md.GetTerm())
	}
	if len(snap.GetData()) == 0 {
		return nil, fmt.Errorf("%w: snapshot file %s holds no data", ErrCorrupt, path)
	}
	return snap, nil
}

// removeSnapFiles deletes the snapshot files under dir other than keep (a
// file name; "" keeps none) whose index is below below, and, when
// leftovers is set (at Open, when no writer runs), every temporary file and
// every snapshot file above keep too: a crash between writing a file and
// committing its record leaves those. A file at or above below that a
// writer is preparing (CreateSnapshot writes its file before it takes the
// writers' lock) is never touched at run time. A missing dir holds nothing.
func removeSnapFiles(dir, keep string, below uint64, leftovers bool) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("raftstore: list snapshot files: %w", err)
	}
	removed := false
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || name == keep {
			continue
		}
		index, isSnap := parseSnapFileName(name)
		drop := (isSnap && index < below) || (leftovers && (isSnap || strings.HasSuffix(name, tmpSuffix)))
		if !drop {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("raftstore: remove superseded snapshot file: %w", err)
		}
		removed = true
	}
	if removed {
		if err := backends.SyncDir(dir); err != nil {
			return fmt.Errorf("raftstore: %w", err)
		}
	}
	return nil
}
