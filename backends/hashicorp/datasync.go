package hashicorp

import (
	"fmt"
	"os"
	"sync/atomic"

	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"

	"github.com/ticketd/ticketd/backends"
)

// This file gives raft-wal's segment files a data sync (fdatasync) in place
// of a full fsync.

// dataSyncFile is a raft-wal segment file whose Sync is a data sync
// (dataSyncOS: fdatasync(2) on Linux). Segments are preallocated when
// created, so an append changes nothing a data sync would skip except the
// timestamps; it still writes the data and the metadata needed to read it
// back (the extents an append converts from preallocated to written, and
// the size when a sealing batch runs past the preallocation). A full fsync
// would also commit the modification time through the file system's
// journal on every append (ext4), a device flush Raft does not need. As
// raft-wal's own file does, the first Sync of a new file also syncs its
// directory, so the file's name survives a crash once data in it was
// acknowledged.
type dataSyncFile struct {
	*os.File
	// dir is the directory to sync on the first Sync ("" for a file that
	// existed before this process opened it).
	dir       string
	dirSynced atomic.Bool
}

// dataSync returns f with Sync made a data sync: raft-wal's fs.File of a
// new segment (whose first Sync also syncs dir) or an *os.File of an
// existing one; any other file is returned unchanged.
func dataSync(f types.WritableFile, dir string) types.WritableFile {
	switch f := f.(type) {
	case *walfs.File:
		return &dataSyncFile{File: &f.File, dir: dir}
	case *os.File:
		return &dataSyncFile{File: f}
	}
	return f
}

// Sync makes the file's data durable (and, the first time, its directory
// entry).
func (f *dataSyncFile) Sync() error {
	if err := dataSyncOS(f.File); err != nil {
		return fmt.Errorf("sync %s: %w", f.Name(), err)
	}
	if f.dir == "" || f.dirSynced.Load() {
		return nil
	}
	if err := backends.SyncDir(f.dir); err != nil {
		return err
	}
	f.dirSynced.Store(true)
	return nil
}
