package hashicorp

import (
	"fmt"
	"os"
	"syscall"
)

// dataSyncFile is a raft-wal segment file whose Sync is fdatasync(2).
// Segments are preallocated when created, so an append changes neither
// the size nor anything else fdatasync would skip except the timestamps;
// it still writes the data and the metadata needed to read it back (the
// extents an append converts from preallocated to written, and the size
// when a sealing batch runs past the preallocation). A full fsync would
// also commit the modification time through the file system's journal on
// every append (ext4), a second device flush for nothing Raft needs.
type dataSyncFile struct{ *os.File }

// Sync makes the file's data durable with fdatasync(2).
func (f dataSyncFile) Sync() error {
	if err := syscall.Fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("fdatasync %s: %w", f.Name(), err)
	}
	return nil
}
