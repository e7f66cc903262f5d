package powerfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// mountTest mounts a powerfs on a temporary directory for t, or skips t
// where FUSE cannot be mounted (not root, no /dev/fuse).
func mountTest(t *testing.T, opts Options) (*FS, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("powerfs: mounting a FUSE file system needs root here")
	}
	if f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0); err != nil {
		t.Skipf("powerfs: no /dev/fuse: %v", err)
	} else {
		f.Close()
	}
	dir := t.TempDir()
	pfs, err := Mount(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pfs.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return pfs, dir
}

func cut(t *testing.T, pfs *FS) Loss {
	t.Helper()
	l, err := pfs.Cut()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// writeFile writes data to path (created or truncated); sync calls fsync
// on it before close.
func writeFile(t *testing.T, path string, data []byte, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// appendFile appends data to path without syncing.
func appendFile(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

func wantContent(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s holds %d bytes %.40q, want %d bytes %.40q", filepath.Base(path), len(got), got, len(want), want)
	}
}

func wantMissing(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s after the cut: %v, want it gone", filepath.Base(path), err)
	}
}

// page returns n bytes of b, a page and a half, so writes cross pages.
func page(b byte) []byte { return bytes.Repeat([]byte{b}, pageSize+pageSize/2) }

// Data written after the last fsync of a file is gone after a cut; data
// synced before it stays.
func TestUnsyncedWriteIsLost(t *testing.T) {
	pfs, dir := mountTest(t, Options{})
	path := filepath.Join(dir, "log")
	writeFile(t, path, page('a'), true)
	syncDir(t, dir)
	appendFile(t, path, page('b'))
	wantContent(t, path, append(page('a'), page('b')...))

	l := cut(t, pfs)
	wantContent(t, path, page('a'))
	if l.Files != 1 || l.Pages == 0 {
		t.Errorf("loss %v, want the pages of one file", l)
	}
}

// fsync and fdatasync both keep a file's data and size.
func TestSyncedWriteSurvives(t *testing.T) {
	for _, how := range []string{"fsync", "fdatasync", "O_DSYNC"} {
		t.Run(how, func(t *testing.T) {
			pfs, dir := mountTest(t, Options{})
			path := filepath.Join(dir, "log")
			writeFile(t, path, page('a'), true)
			syncDir(t, dir)
			flags := os.O_WRONLY | os.O_APPEND
			if how == "O_DSYNC" {
				flags |= unix.O_DSYNC
			}
			f, err := os.OpenFile(path, flags, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(page('b')); err != nil {
				t.Fatal(err)
			}
			switch how {
			case "fsync":
				err = f.Sync()
			case "fdatasync":
				err = unix.Fdatasync(int(f.Fd()))
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			cut(t, pfs)
			wantContent(t, path, append(page('a'), page('b')...))
		})
	}
}

// A file created and synced in a directory that was not synced after it
// vanishes at a cut, unless a journal commit (Options.Journal) took its
// name along.
func TestNewFileNeedsItsDirectorySynced(t *testing.T) {
	pfs, dir := mountTest(t, Options{})
	path := filepath.Join(dir, "new")
	writeFile(t, path, page('a'), true)
	cut(t, pfs)
	wantMissing(t, path)

	writeFile(t, path, page('a'), true)
	syncDir(t, dir)
	cut(t, pfs)
	wantContent(t, path, page('a'))

	// A directory made and synced in its parent keeps its own entries
	// only through its own fsync.
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	syncDir(t, dir)
	writeFile(t, filepath.Join(sub, "x"), page('x'), true)
	cut(t, pfs)
	if fi, err := os.Stat(sub); err != nil || !fi.IsDir() {
		t.Fatalf("sub after the cut: %v, want the directory", err)
	}
	wantMissing(t, filepath.Join(sub, "x"))

	t.Run("journal", func(t *testing.T) {
		pfs, dir := mountTest(t, Options{Journal: true})
		path := filepath.Join(dir, "new")
		writeFile(t, path, page('a'), true)
		cut(t, pfs)
		wantContent(t, path, page('a'))
		// Without any sync after it, even a journal loses the name.
		writeFile(t, filepath.Join(dir, "unsynced"), page('u'), false)
		cut(t, pfs)
		wantMissing(t, filepath.Join(dir, "unsynced"))
	})
}

// A rename (write a temporary file, fsync it, rename it over the target) is
// undone by a cut until the directory is synced; then it holds.
func TestRenameNeedsDirectorySync(t *testing.T) {
	pfs, dir := mountTest(t, Options{})
	target, tmp := filepath.Join(dir, "mark"), filepath.Join(dir, "mark.tmp")
	writeFile(t, target, []byte("old"), true)
	syncDir(t, dir)

	writeFile(t, tmp, []byte("new"), true)
	if err := os.Rename(tmp, target); err != nil {
		t.Fatal(err)
	}
	wantContent(t, target, []byte("new"))
	cut(t, pfs)
	wantContent(t, target, []byte("old"))
	wantMissing(t, tmp) // created after the directory's last sync

	writeFile(t, tmp, []byte("new"), true)
	if err := os.Rename(tmp, target); err != nil {
		t.Fatal(err)
	}
	syncDir(t, dir)
	cut(t, pfs)
	wantContent(t, target, []byte("new"))
	wantMissing(t, tmp)

	// An unlink is undone the same way.
	if err := os.Remove(target); err != nil {
		t.Fatal(err)
	}
	cut(t, pfs)
	wantContent(t, target, []byte("new"))
}

// A truncation is data like a write: undone by a cut unless synced, and the
// bytes it cut off read as zeros when the file grows again.
func TestTruncate(t *testing.T) {
	pfs, dir := mountTest(t, Options{})
	path := filepath.Join(dir, "f")
	three := bytes.Repeat([]byte{'t'}, 3*pageSize)
	writeFile(t, path, three, true)
	syncDir(t, dir)

	if err := os.Truncate(path, 100); err != nil {
		t.Fatal(err)
	}
	cut(t, pfs)
	wantContent(t, path, three)

	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(100); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("end"), 2*pageSize); err != nil {
		t.Fatal(err)
	}
	grown := append(append(bytes.Clone(three[:100]), make([]byte, 2*pageSize-100)...), "end"...)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	wantContent(t, path, grown)
	cut(t, pfs)
	wantContent(t, path, three[:100])
}

// A shared writable mapping works, and msync(MS_SYNC) makes what was
// written through it durable (the kernel writes the dirty pages back, then
// sends an fsync); what was written after the last msync is lost, even
// after munmap and close.
func TestMmapMsync(t *testing.T) {
	pfs, dir := mountTest(t, Options{})
	path := filepath.Join(dir, "wal")
	const size = 16 * pageSize
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	syncDir(t, dir)
	// The mapping is written by another process: a page fault on a
	// FUSE-backed mapping waits in the kernel for the FUSE server, and if
	// that server is this process, a garbage collection that starts
	// meanwhile waits for the faulting thread while the server's
	// goroutines wait for the collection — a deadlock no test timeout can
	// end (go-fuse serves file systems to other processes; ticketd's nodes
	// are other processes in the power-loss runs).
	cmd := exec.Command(os.Args[0], "-test.run=^TestMmapMsyncWriter$", "-test.count=1")
	cmd.Env = append(os.Environ(), mmapWriterEnv+"="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mmap writer process: %v\n%s", err, out)
	}
	want := make([]byte, size)
	copy(want[10:], "synced")
	copy(want[5*pageSize:], "synced too")
	withLost := bytes.Clone(want)
	copy(withLost[20:], "lost")
	copy(withLost[9*pageSize:], "lost too")
	wantContent(t, path, withLost)

	cut(t, pfs)
	wantContent(t, path, want)
}

// mmapWriterEnv names the file TestMmapMsyncWriter maps; unset, that test
// does nothing.
const mmapWriterEnv = "TICKETD_POWERFS_MMAP_WRITER"

// TestMmapMsyncWriter is TestMmapMsync's writer, run in a process of its
// own: it maps the file named by mmapWriterEnv shared and writable, writes
// two pages, msyncs them (MS_SYNC), writes two more pages and unmaps
// without a sync.
func TestMmapMsyncWriter(t *testing.T) {
	path := os.Getenv(mmapWriterEnv)
	if path == "" {
		t.Skip("TestMmapMsync's writer process: runs only when TestMmapMsync starts it")
	}
	const size = 16 * pageSize
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("shared writable mmap on powerfs: %v", err)
	}
	copy(m[10:], "synced")
	copy(m[5*pageSize:], "synced too")
	if err := unix.Msync(m, unix.MS_SYNC); err != nil {
		t.Fatal(err)
	}
	copy(m[20:], "lost")
	copy(m[9*pageSize:], "lost too")
	if err := unix.Munmap(m); err != nil {
		t.Fatal(err)
	}
}
