package applytime_test

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ticketd/ticketd/backends/tmpfstest"
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
			dir := tmpfstest.Mount(t, 256<<10)
			path, h := filepath.Join(dir, applytime.FileName), &testHost{epoch: "boot-1", since: time.Hour}
			r, err := openRecord(t, path, h, false)
			require.NoError(t, err)
			applyThree(t, r, h)
			makeSparse(t, path) // as an older binary left it
			filler := tmpfstest.Fill(t, dir, 0)

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
			dir := tmpfstest.Mount(t, 256<<10)
			path, h := filepath.Join(dir, applytime.FileName), &testHost{epoch: "boot-1", since: time.Hour}
			filler := tmpfstest.Fill(t, dir, int64(os.Getpagesize()))

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
