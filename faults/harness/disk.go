//go:build faults

package harness

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/faults/nemesis"
)

var _ nemesis.DiskTarget = (*target)(nil)

// fullReserve is the free space FillDisk leaves: less than the space a node
// keeps in reserve before each write (badgerlog.ReserveBytes: 4 memtables of
// 16 MiB), so its first write finds the disk full, and enough for badger to
// open (it creates a memtable log through a mapping, which a tmpfs with no
// page left would answer with SIGBUS before the node checks anything).
const fullReserve = 48 << 20

// DamageLog flips nemesis.DamageBytes bytes of an appended entry's
// payload in node i's (killed) log store, in place, after keeping a copy
// of its data dir; the returned function puts the copy back. The entry is
// nemesis.DamageSpot's: the newest one at or below the index the node's
// watermark records (backends.DurableLogEnd), in the newest file of the
// store that holds one (backends.NewestLogFile, then older files of the
// same kind). (Restoring the bytes alone would not do: badger replays
// the damaged log when the node starts, truncates it at the damage and
// flushes it, and raft-wal truncates its tail segment at a bad last
// batch, before the node notices the short log and refuses to start.)
func (k *target) DamageLog(i int) (func() error, error) {
	k.markLog(i)
	dir := k.c.Node(i).DataDir
	durable, err := backends.DurableLogEnd(dir)
	if err != nil {
		return nil, fmt.Errorf("harness: node %d: %w", i, err)
	}
	newest, store, err := backends.NewestLogFile(dir)
	if err != nil {
		return nil, fmt.Errorf("harness: newest log file of node %d: %w", i, err)
	}
	format := logFormat(dir, newest, store)
	files, err := filepath.Glob(filepath.Join(filepath.Dir(newest), "*"+filepath.Ext(newest)))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	for j := len(files) - 1; j >= 0; j-- {
		b, err := os.ReadFile(files[j])
		if err != nil {
			return nil, err
		}
		off, _, err := nemesis.DamageSpot(format, b, durable)
		if errors.Is(err, nemesis.ErrNoEntryToDamage) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("harness: %s of node %d: %w", files[j], i, err)
		}
		backup := dir + ".backup"
		if err := copyTree(dir, backup); err != nil {
			return nil, err
		}
		flipped := slices.Clone(b[off : off+nemesis.DamageBytes])
		for x := range flipped {
			flipped[x] ^= 0xA5
		}
		if err := writeAt(files[j], flipped, int64(off)); err != nil {
			return nil, errors.Join(err, os.RemoveAll(backup))
		}
		return func() error {
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			return os.Rename(backup, dir)
		}, nil
	}
	return nil, fmt.Errorf("harness: node %d: %w in %d %s files of %s", i, nemesis.ErrNoEntryToDamage, len(files), store, filepath.Dir(newest))
}

// logFormat returns the format of newest, the newest log file of store in
// dataDir (backends.LogStoreDir: badger's, or a backend's write-ahead log).
func logFormat(dataDir, newest, store string) nemesis.LogFormat {
	switch {
	case store == backends.LogStoreBadger:
		return nemesis.BadgerMemtableLog
	case strings.HasPrefix(newest, backends.LogStoreDir(dataDir, "etcd", store)+string(filepath.Separator)):
		return nemesis.EtcdWALSegment
	}
	return nemesis.RaftWALSegment
}

// LogEnd returns the last index node i's watermark records as durably
// appended (backends.DurableLogEnd).
func (k *target) LogEnd(i int) (uint64, error) {
	return backends.DurableLogEnd(k.c.Node(i).DataDir)
}

func writeAt(path string, b []byte, off int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b, off)
	return errors.Join(err, f.Sync(), f.Close())
}

// FillDisk moves node i's data dir (node killed) onto a tmpfs mounted in its
// place with fullReserve bytes free. It needs root (mount).
func (k *target) FillDisk(i int) error {
	k.markLog(i)
	return k.moveToTmpfs(i, fullReserve)
}

// moveToTmpfs moves node i's data dir (node killed) onto a tmpfs mounted in
// its place, with exactly free bytes of free space after the copy (a disk
// that holds nothing else: the tmpfs is sized to the copy, not to what du
// counted before it). Every file holds the space it held before
// (copyTree): a write-ahead log segment preallocated on the roomy disk is
// preallocated on the full one, so the node may write into it as it could
// there, and nowhere else. It needs root.
func (k *target) moveToTmpfs(i int, free int64) error {
	dir := k.c.Node(i).DataDir
	aside := dir + ".roomy"
	if err := os.Rename(dir, aside); err != nil {
		return err
	}
	used, _, err := backends.DiskUsage(aside)
	if err == nil {
		err = os.Mkdir(dir, 0o700)
	}
	if err == nil {
		// Room for the copy (file systems count blocks apart) and the
		// free space; resized to the copy below.
		err = run("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", 2*used+free+tmpfsSlack), "tmpfs", dir)
	}
	if err == nil {
		err = copyTree(aside, dir)
	}
	if err == nil {
		err = resizeFree(dir, free)
	}
	if err != nil {
		_ = run("umount", dir)
		_ = os.Remove(dir)
		return errors.Join(err, os.Rename(aside, dir))
	}
	return os.RemoveAll(aside)
}

// tmpfsSlack is room a tmpfs is mounted with beyond its contents, before
// resizeFree sizes it.
const tmpfsSlack = 8 << 20

// resizeFree remounts the tmpfs at dir so that exactly free bytes of it
// are free (to the page; tmpfs counts whole pages), and checks that they
// are (statfs).
func resizeFree(dir string, free int64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return err
	}
	used := int64(st.Blocks-st.Bfree) * st.Bsize
	if err := run("mount", "-o", fmt.Sprintf("remount,size=%d", used+free), dir); err != nil {
		return err
	}
	if err := syscall.Statfs(dir, &st); err != nil {
		return err
	}
	if got := int64(st.Bavail) * st.Bsize; got < free || got >= free+st.Bsize {
		return fmt.Errorf("harness: tmpfs at %s has %d bytes free after resizing it for %d", dir, got, free)
	}
	return nil
}

// copyTree copies the directory tree src into dst, made if missing (cp -a:
// modes, owners and times, dst's own included), and gives every file the space it holds in src: sparse where it is
// sparse (badger's memtable and value logs are mapped files grown with
// ftruncate), and allocated in full where it is allocated in full (a
// write-ahead log segment preallocated with fallocate(2), which cp
// --sparse would leave as holes, as it holds zeros).
func copyTree(src, dst string) error {
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	if err := run("cp", "-a", "--sparse=always", src+"/.", dst+"/"); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		from, err := os.Stat(path)
		if err != nil {
			return err
		}
		to, err := os.Stat(filepath.Join(dst, rel))
		if err != nil {
			return err
		}
		if allocated(from) < from.Size() || allocated(to) >= to.Size() {
			return nil
		}
		return run("fallocate", "-l", fmt.Sprint(to.Size()), filepath.Join(dst, rel))
	})
}

// allocated returns the bytes fi's file occupies on disk (st_blocks).
func allocated(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// FreeDisk moves node i's data (node killed) back off the tmpfs.
func (k *target) FreeDisk(i int) error {
	dir := k.c.Node(i).DataDir
	aside := dir + ".roomy"
	if err := os.Mkdir(aside, 0o700); err != nil {
		return err
	}
	if err := copyTree(dir, aside); err != nil {
		return err
	}
	if err := run("umount", dir); err != nil {
		return err
	}
	if err := os.Remove(dir); err != nil {
		return err
	}
	return os.Rename(aside, dir)
}

// Exited reports whether node i's process has exited, and the last line of
// its log that says why (a refused start or a fatal error).
func (k *target) Exited(i int) (bool, string) {
	if k.c.Node(i).Running() {
		return false, ""
	}
	b, _ := os.ReadFile(k.c.Node(i).LogFile)
	if m := k.logMark[i]; m <= int64(len(b)) {
		b = b[m:]
	}
	lines := strings.Split(string(b), "\n")
	for j := len(lines) - 1; j >= 0; j-- {
		l := lines[j]
		if strings.Contains(l, "refusing to start") || strings.Contains(l, "refuses to start") || strings.Contains(l, "disk full") || strings.Contains(l, "fatal") {
			if len(l) > 400 {
				l = l[:400]
			}
			return true, l
		}
	}
	return true, ""
}

// markLog records the size of node i's log, so Exited reads only what
// follows.
func (k *target) markLog(i int) {
	if k.logMark == nil {
		k.logMark = map[int]int64{}
	}
	if fi, err := os.Stat(k.c.Node(i).LogFile); err == nil {
		k.logMark[i] = fi.Size()
	}
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
