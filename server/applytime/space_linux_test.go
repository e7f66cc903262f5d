package applytime_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ticketd/ticketd/server/applytime"
)

// spaceSpan is the Span of the records these tests open: 6,002 slots, a
// file of 24 pages, so that a page of slots is not the header's page.
const spaceSpan = time.Minute

// openRecord opens the record at path with Span spaceSpan, closed when the
// test ends; the error is the test's to check.
func openRecord(t *testing.T, path string, h *testHost, keep bool) (*applytime.Record, error) {
	t.Helper()
	r, err := applytime.Open(applytime.Config{Path: path, Span: spaceSpan, Host: h, Now: h.now, Keep: keep})
	if err == nil {
		t.Cleanup(func() { _ = r.Close() })
	}
	return r, err
}

// allocators runs f once as the host is (fallocate(2)), once as on a file
// system without fallocate (Open writes the file instead).
func allocators(t *testing.T, f func(t *testing.T)) {
	t.Run("fallocate", f)
	t.Run("write", func(t *testing.T) { applytime.NoFallocate(t); f(t) })
}

// applyThree records indexes 1 to 3, 3 ms apart, and closes r.
func applyThree(t *testing.T, r *applytime.Record, h *testHost) {
	t.Helper()
	for i := uint64(1); i <= 3; i++ {
		r.Applied(i)
		h.advance(3 * time.Millisecond)
	}
	require.NoError(t, r.Close())
}

// requireKept fails the test unless r answers for indexes 1 to 3
// (applyThree's, kept through what happened since).
func requireKept(t *testing.T, r *applytime.Record) {
	t.Helper()
	for i := uint64(1); i <= 3; i++ {
		_, ok := r.At(i)
		require.True(t, ok, "index %d: the earlier run's record must be kept", i)
	}
}

// TestOpenAllocates: Open leaves every block of the record's file
// allocated, both a new file and a sparse one an older binary left (grown
// with ftruncate, only its written pages allocated), whose slots it keeps:
// a mapped page without a block gets one inside a page fault, which a full
// disk answers with SIGBUS.
func TestOpenAllocates(t *testing.T) {
	allocators(t, func(t *testing.T) {
		path, h := fresh(t)
		r, err := openRecord(t, path, h, false)
		require.NoError(t, err)
		requireAllocated(t, path)
		applyThree(t, r, h)

		makeSparse(t, path)
		r, err = openRecord(t, path, h, true)
		require.NoError(t, err)
		requireAllocated(t, path)
		requireKept(t, r)
	})
}

// TestOpenOnFullDisk: on a file system with no room for the whole record,
// Open fails with an error that wraps ENOSPC and names the file, instead of
// the process dying of SIGBUS when it reads or writes the mapping; a record
// being kept keeps its slots for the Open after space is freed. It mounts a
// tmpfs of its own (root).
func TestOpenOnFullDisk(t *testing.T) {
	t.Run("sparse record kept", func(t *testing.T) {
		allocators(t, func(t *testing.T) {
			dir := mountTmpfs(t, 256<<10)
			path, h := filepath.Join(dir, applytime.FileName), &testHost{epoch: "boot-1", since: time.Hour}
			r, err := openRecord(t, path, h, false)
			require.NoError(t, err)
			applyThree(t, r, h)
			makeSparse(t, path) // as an older binary left it
			filler := fillUp(t, dir, 0)

			_, err = openRecord(t, path, h, true)
			requireNoSpace(t, err, path)

			require.NoError(t, os.Remove(filler))
			r, err = openRecord(t, path, h, true)
			require.NoError(t, err)
			requireAllocated(t, path)
			requireKept(t, r)
		})
	})
	t.Run("new record, room for one page", func(t *testing.T) {
		allocators(t, func(t *testing.T) {
			dir := mountTmpfs(t, 256<<10)
			path, h := filepath.Join(dir, applytime.FileName), &testHost{epoch: "boot-1", since: time.Hour}
			filler := fillUp(t, dir, int64(os.Getpagesize()))

			_, err := openRecord(t, path, h, false)
			requireNoSpace(t, err, path)

			require.NoError(t, os.Remove(filler))
			_, err = openRecord(t, path, h, false)
			require.NoError(t, err)
			requireAllocated(t, path)
		})
	})
}

func requireNoSpace(t *testing.T, err error, path string) {
	t.Helper()
	require.Error(t, err, "Open on a full disk")
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.ErrorContains(t, err, path, "the error names the file")
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted
// when the test ends (after the records opened later are closed), and
// returns the directory. It skips the test unless it runs as root.
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs that can be filled (mount -t tmpfs)")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount the tmpfs on %s: %v", dir, err)
		}
	})
	return dir
}

// fillUp writes a file in dir until its file system is full, then gives
// back free bytes (a whole number of pages) and checks that exactly that
// much is free; it returns the file's path.
func fillUp(t *testing.T, dir string, free int64) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	require.NoError(t, err)
	chunk := make([]byte, 64<<10)
	for err == nil {
		_, err = f.Write(chunk)
	}
	require.ErrorIs(t, err, syscall.ENOSPC)
	fi, err := f.Stat()
	require.NoError(t, err)
	require.NoError(t, f.Truncate(fi.Size()-free))
	require.NoError(t, f.Close())
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &st))
	require.Equal(t, free, int64(st.Bavail)*st.Bsize, "free bytes after filling %s", dir)
	return path
}

// requireAllocated fails the test unless every byte of the file at path
// has a block (st_blocks counts 512-byte units).
func requireAllocated(t *testing.T, path string) {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Stat(path, &st))
	require.GreaterOrEqual(t, st.Blocks*512, st.Size, "%s: %d of %d bytes allocated", path, st.Blocks*512, st.Size)
}

// makeSparse rewrites the (closed) record at path as an older binary left
// it: the same bytes, in a file grown with ftruncate where only the pages
// holding a non-zero byte were written (the others are holes).
func makeSparse(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.Remove(path))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_EXCL, 0o600)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(int64(len(b))))
	page := os.Getpagesize()
	zero := make([]byte, page)
	for off := 0; off < len(b); off += page {
		p := b[off:min(off+page, len(b))]
		if !bytes.Equal(p, zero[:len(p)]) {
			_, err = f.WriteAt(p, int64(off))
			require.NoError(t, err)
		}
	}
	require.NoError(t, f.Close())
	var st unix.Stat_t
	require.NoError(t, unix.Stat(path, &st))
	require.Less(t, st.Blocks*512, st.Size, "%s: the copy must be sparse", path)
}
