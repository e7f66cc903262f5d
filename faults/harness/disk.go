//go:build faults

package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/faults/nemesis"
)

var _ nemesis.DiskTarget = (*target)(nil)

// fullReserve is the free space FillDisk leaves: less than the space a node
// keeps in reserve before each write (badgerlog.ReserveBytes: 4 memtables of
// 16 MiB), so its first write finds the disk full.
const fullReserve = 48 << 20

// DamageLog flips 4 bytes near the end of the records of the file holding
// the newest appends of node i's (killed) log store — badger's newest
// memtable log (*.mem), or the write-ahead log's tail segment (*.wal):
// backends.NewestLogFile — in place, after keeping a copy of its data dir;
// the returned function puts the copy back. (Restoring the 4 bytes alone
// would not do: badger replays the damaged log when the node starts,
// truncates it at the damage and flushes it, and raft-wal truncates its
// tail segment at the first bad batch, before the node notices the short
// log and refuses to start.)
func (k *target) DamageLog(i int) (func() error, error) {
	k.markLog(i)
	dir := k.c.Node(i).DataDir
	path, store, err := backends.NewestLogFile(dir)
	if err != nil {
		return nil, fmt.Errorf("harness: newest log file of node %d: %w", i, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	end := len(bytes.TrimRight(b, "\x00"))
	if end < 512 {
		return nil, fmt.Errorf("harness: %s log file %s of node %d holds only %d bytes of records", store, path, i, end)
	}
	backup := dir + ".backup"
	if err := run("cp", "-a", "--sparse=always", dir, backup); err != nil {
		return nil, err
	}
	off := int64(end - min(1500, end/2))
	flipped := slices.Clone(b[off : off+4])
	for j := range flipped {
		flipped[j] ^= 0xA5
	}
	if err := writeAt(path, flipped, off); err != nil {
		return nil, errors.Join(err, os.RemoveAll(backup))
	}
	return func() error {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		return os.Rename(backup, dir)
	}, nil
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
// place whose free space is fullReserve. It needs root (mount).
func (k *target) FillDisk(i int) error {
	k.markLog(i)
	return k.moveToTmpfs(i, fullReserve)
}

// moveToTmpfs moves node i's data dir (node killed) onto a tmpfs mounted in
// its place with free bytes of free space after the copy. It needs root.
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
		err = run("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", used+free), "tmpfs", dir)
	}
	if err == nil {
		err = run("cp", "-a", "--sparse=always", aside+"/.", dir+"/")
	}
	if err != nil {
		_ = run("umount", dir)
		_ = os.Remove(dir)
		return errors.Join(err, os.Rename(aside, dir))
	}
	return os.RemoveAll(aside)
}

// FreeDisk moves node i's data (node killed) back off the tmpfs.
func (k *target) FreeDisk(i int) error {
	dir := k.c.Node(i).DataDir
	aside := dir + ".roomy"
	if err := os.Mkdir(aside, 0o700); err != nil {
		return err
	}
	if err := run("cp", "-a", "--sparse=always", dir+"/.", aside+"/"); err != nil {
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
		if strings.Contains(l, "refusing to start") || strings.Contains(l, "disk full") || strings.Contains(l, "fatal") {
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
