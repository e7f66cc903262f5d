package badgerlog

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/ticketd/ticketd/backends"
)

// ReserveBytes is the free space Batch requires on the database's file
// system before it writes: room for badger's next memtable write-ahead log
// (2 × the memtable size, created sparse), its flush to a level-0 table (one
// memtable), and as much again for compaction. badger writes its
// write-ahead and value logs through mmap into sparse files, so running out
// of space is not an error from write(2) but a SIGBUS that kills the
// process with a trace from inside badger (fail-stop,
// docs/design.md#storage-and-recovery): the node therefore stops, with an
// error saying the disk is full, while space remains.
var ReserveBytes = 4 * uint64(backends.BadgerOptions("").MemTableSize)

// FreeBytes returns the bytes available to this process on the file system
// holding dir (statfs). It is a variable so that tests can inject a full
// disk below the storage layer; production code never changes it.
var FreeBytes = func(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// CheckSpace returns an error wrapping ErrDiskFull (and syscall.ENOSPC) when
// the file system holding dir has less than ReserveBytes available. A failed
// statfs is not reported: it is no reason to stop writing.
func CheckSpace(dir string) error {
	free, err := FreeBytes(dir)
	if err != nil || free >= ReserveBytes {
		return nil
	}
	return fmt.Errorf("%w: %d bytes free under %s, %d needed: free space (or move the data dir to a larger disk) and restart the node: %w",
		ErrDiskFull, free, dir, ReserveBytes, syscall.ENOSPC)
}

// DiskFull returns err wrapped with ErrDiskFull when it is (or wraps)
// syscall.ENOSPC or EDQUOT and does not wrap ErrDiskFull already; other
// errors, and nil, are returned unchanged.
func DiskFull(err error) error {
	if err == nil || errors.Is(err, ErrDiskFull) {
		return err
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w (no space left on device): free space and restart the node: %w", ErrDiskFull, err)
	}
	return err
}
