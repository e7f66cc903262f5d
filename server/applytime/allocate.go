package applytime

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// This file gives the record's file every block it will ever write before
// the file is mapped. A mapped page without a block behind it (a hole: the
// file was grown with ftruncate, or copied sparse) gets one when it is
// first touched, inside the page fault; on a file system with no space left
// that fault cannot fail with an error and ends the process with SIGBUS (a
// Go crash dump, exit status 2) at whichever load or store touched it:
// reading an earlier run's slots at Open, or an apply. With every block
// allocated first, a full disk is an error of Open, which the node turns
// into its disk-full fail-stop (docs/design.md#storage-and-recovery), and
// the mapped loads and stores never allocate.

// allocateChunk is the most one fallocate(2) call allocates (bytes). tmpfs
// gives up an allocation on any pending signal (EINTR) and undoes it; in
// chunks, a retry repeats one chunk, not the file.
const allocateChunk = 16 << 20

// rewriteChunk is the size of one read and write of rewrite (bytes).
const rewriteChunk = 1 << 20

// errNoFallocate: the file system offers no fallocate(2) (EOPNOTSUPP, as
// ZFS before 2.2 or a FUSE file system without it; ENOSYS), or the host no
// such call.
var errNoFallocate = errors.New("applytime: no fallocate on this file system")

// allocate makes every block of f's first size bytes allocated, growing f
// to size bytes if it is shorter (the new bytes read as zeros) and keeping
// every byte it holds: the record's slots survive it (Config.Keep). It uses
// fallocate(2), which allocates without writing and is nearly free on a
// file already allocated; where the file system has none, it rewrites the
// file (rewrite). The caller holds the file's lock and has not mapped it,
// so nothing writes the file meanwhile. Errors name the file; a full disk
// wraps syscall.ENOSPC (EDQUOT past a quota).
func allocate(f *os.File, size int64) error {
	for off := int64(0); off < size; off += allocateChunk {
		err := fallocate(f, off, min(allocateChunk, size-off))
		if errors.Is(err, errNoFallocate) {
			return rewrite(f, off, size)
		}
		if err != nil {
			return fmt.Errorf("allocate its %d bytes: %w", size, err)
		}
	}
	return nil
}

// rewrite writes f's bytes from off up to size back where they are (zeros
// past its end), which gives every block of the range to the file: a block
// written is a block allocated, on any file system. Its own bytes, not
// zeros, so that a record being kept keeps its slots (a hole reads as zeros
// and is written as zeros). The cost, one read and one write of the file
// at every start (960 KB at the default lease.max_ms, 138 MB at 24 h),
// falls only on file systems without fallocate(2).
func rewrite(f *os.File, off, size int64) error {
	buf := make([]byte, min(rewriteChunk, size-off))
	for off < size {
		b := buf[:min(int64(len(buf)), size-off)]
		n, err := f.ReadAt(b, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("allocate its %d bytes: %w", size, err)
		}
		clear(b[n:])
		if _, err := f.WriteAt(b, off); err != nil {
			return fmt.Errorf("allocate its %d bytes by writing them: %w", size, err)
		}
		off += int64(len(b))
	}
	return nil
}
