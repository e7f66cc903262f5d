//go:build linux

// Package tmpfstest gives a test a file system of its own that it can fill:
// a tmpfs of a chosen size (mount(2), so root only) and a file that takes
// all of its space but a chosen number of bytes. Storage code under test
// then meets a full disk for real — ENOSPC from write(2), or a SIGBUS where
// it writes through mmap into a sparse file — rather than an injected error
// (docs/design.md#storage-and-recovery: a node that cannot write stops
// loudly and cleanly).
package tmpfstest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Mount mounts a tmpfs of size bytes (mode 0700) on a new directory and
// returns it; the file system is unmounted when the test ends, after the
// cleanups registered later (files opened on it are closed first). It
// skips the test unless it runs as root.
func Mount(t testing.TB, size int) string {
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

// Fill writes the file dir/filler until dir's file system is full
// (ENOSPC), then gives back free bytes (rounded by the caller to whole
// pages: tmpfs counts pages) and checks with statfs(2) that exactly that
// much is free. It returns the filler's path: removing it frees the space.
func Fill(t testing.TB, dir string, free int64) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for err == nil {
		_, err = f.Write(chunk)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("fill %s: %v, want ENOSPC", dir, err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(fi.Size() - free); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if got := int64(st.Bavail) * st.Bsize; got != free {
		t.Fatalf("free bytes after filling %s: %d, want %d", dir, got, free)
	}
	return path
}
