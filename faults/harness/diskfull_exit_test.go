//go:build faults

package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/server/applytime"
)

// TestDiskFullExitsCleanly: a running follower whose data dir (on a tmpfs
// of the test's own) fills up completely stops on its next write with the
// fail-stop log line and exits with status 1: no Go crash dump (badger
// flushing its memtable into a full tmpfs on close dies of SIGBUS inside
// its mmap), and once space is freed it starts again and catches up with
// every acknowledged grant. It needs root (mount) and is skipped otherwise.
func TestDiskFullExitsCleanly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs for the node's data dir (mount -t tmpfs)")
	}
	for _, b := range []string{"hashicorp", "etcd"} {
		t.Run(b, func(t *testing.T) { diskFullExit(t, b) })
	}
}

func diskFullExit(t *testing.T, backend string) {
	c := StartCluster(t, backend, 3, 500*time.Millisecond, "")
	k := &target{c: c}
	acked := map[string]uint64{}
	grant := func(key string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := c.Lock(c.Leader(t)).Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: 600_000, Owner: "o-" + key})
		if err == nil {
			acked[key] = res.GetToken()
		}
		return err
	}
	for i := range 20 {
		if err := grant(fmt.Sprintf("before/%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	v := (c.Leader(t) + 1) % c.Len()
	dir := c.Node(v).DataDir
	c.Kill(v)
	freeDisk := onTmpfs(t, k, v, 256<<20)
	c.Restart(v)
	waitCaughtUp(t, c, v)
	for i := range 10 {
		if err := grant(fmt.Sprintf("memtable/%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	waitCaughtUp(t, c, v)

	k.markLog(v)
	filler := filepath.Join(dir, "filler")
	if err := fillUp(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; c.Node(v).Running(); i++ {
		if time.Now().After(deadline) {
			t.Fatalf("%s still runs 60 s after its disk filled", c.Node(v).ID)
		}
		_ = grant(fmt.Sprintf("full/%04d", i)) // acknowledged by the other two
	}
	checkFailStop(t, k, v)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freeDisk()
	rejoin(t, c, v, acked)
}

// onTmpfs moves node v's data dir (node killed) onto a tmpfs of its own
// with free bytes free (moveToTmpfs). It returns freeDisk, which moves it
// back (FreeDisk); if the test ends before that, the node is killed and
// the tmpfs unmounted (before the cluster's Close).
func onTmpfs(t *testing.T, k *target, v int, free int64) (freeDisk func()) {
	t.Helper()
	dir := k.c.Node(v).DataDir
	if err := k.moveToTmpfs(v, free); err != nil {
		t.Fatal(err)
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			k.c.Kill(v)
			if err := run("umount", dir); err != nil {
				t.Errorf("unmount the tmpfs at %s: %v", dir, err)
			}
		}
	})
	return func() {
		t.Helper()
		if err := k.FreeDisk(v); err != nil {
			t.Fatal(err)
		}
		mounted = false
	}
}

// rejoin restarts node v (stopped, its data dir back on a roomy disk) and
// fails the test unless it catches up and holds every grant in acked (key:
// token) with its token.
func rejoin(t *testing.T, c *ticketdtest.Cluster, v int, acked map[string]uint64) {
	t.Helper()
	c.Restart(v)
	waitCaughtUp(t, c, v)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for key, tok := range acked {
		res, err := c.Lock(v).GetLock(ctx, &ticketv1.GetLockRequest{Key: key, Stale: true})
		if err != nil || !res.GetHeld() || res.GetToken() != tok {
			t.Fatalf("%s after rejoining: %s = %+v, %v; want held with token %d", c.Node(v).ID, key, res, err, tok)
		}
	}
	t.Logf("%s rejoined with all %d acknowledged grants", c.Node(v).ID, len(acked))
}

// checkFailStop fails the test unless node v, stopped, exited through its
// fail-stop: status 1, a line saying the disk is full, no Go crash dump in
// what it logged since k.markLog(v).
func checkFailStop(t *testing.T, k *target, v int) {
	t.Helper()
	c := k.c
	code, _ := c.Node(v).ExitCode()
	_, why := k.Exited(v)
	out, _ := os.ReadFile(c.Node(v).LogFile)
	out = out[k.logMark[v]:]
	t.Logf("%s exited with status %d: %s", c.Node(v).ID, code, why)
	for _, dump := range []string{"goroutine ", "SIGBUS", "panic"} {
		if strings.Contains(string(out), dump) {
			t.Errorf("the log of the stopped node holds %q (a Go crash dump)", dump)
		}
	}
	if t.Failed() {
		// The dump from its start: the signal or panic and the goroutine
		// that raised it come first.
		start := len(out)
		for _, head := range []string{"panic: ", "fatal error: ", "unexpected fault"} {
			if i := strings.Index(string(out), head); i >= 0 {
				start = min(start, i)
			}
		}
		t.Logf("the dump begins:\n%s", out[start:min(len(out), start+4000)])
	}
	if code != 1 {
		t.Fatalf("exit status %d, want 1", code)
	}
	if !strings.Contains(why, "disk full") {
		t.Fatalf("no fail-stop line saying the disk is full (last: %q)", why)
	}
}

// TestDiskFullRestartExitsCleanly: a hashicorp node restarted on a full
// disk, with the whole cluster restarted, must exit through its fail-stop
// (status 1, a `disk full` line, no Go crash dump), and once space is freed
// start again and catch up with every acknowledged grant. It needs root.
//
// With 48 MiB free (less than the reserve): on badger the store checks the
// reserve when it opens (badger would map new files it cannot fill, and
// die of SIGBUS) and the node refuses to start, saying the disk is full.
// On wal the node writes a new term (as a candidate, or as a voter asked
// for its vote) before anything is appended to it; the term goes to raft-wal's bolt
// file, which does not check the reserve, and the node stops at its first
// append, the same way.
//
// With no free byte at all (no-space), and the node's apply-time record
// sparse as an older binary left it (grown with ftruncate; the copy to the
// tmpfs keeps its holes), the node stops before Raft runs: it cannot
// allocate the record's blocks. (Mapped without them, the record's first
// read at start died of SIGBUS: a crash dump, status 2.)
func TestDiskFullRestartExitsCleanly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs for the node's data dir (mount -t tmpfs)")
	}
	for _, tc := range []struct {
		name, store string
		free        int64
	}{{"badger", "badger", 48 << 20}, {"wal", "wal", 48 << 20}, {"no-space", "wal", 0}} {
		t.Run(tc.name, func(t *testing.T) { diskFullRestartExit(t, tc.store, tc.free) })
	}
}

func diskFullRestartExit(t *testing.T, store string, free int64) {
	c := startCluster(t, "hashicorp", 3, 500*time.Millisecond, startOptions{logStore: store})
	k := &target{c: c}
	acked := map[string]uint64{}
	for i := range 5 {
		key := fmt.Sprintf("before/%02d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := c.Lock(c.Leader(t)).Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: 600_000, Owner: "o"})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		acked[key] = res.GetToken()
	}
	v := (c.Leader(t) + 1) % c.Len()
	dir := c.Node(v).DataDir
	for i := range c.Len() {
		c.Kill(i)
	}
	if free == 0 {
		if err := run("fallocate", "--dig-holes", filepath.Join(dir, applytime.FileName)); err != nil {
			t.Fatal(err)
		}
	}
	freeDisk := onTmpfs(t, k, v, free)
	k.markLog(v)
	for i := range c.Len() {
		c.Restart(i)
	}
	deadline := time.Now().Add(60 * time.Second)
	for c.Node(v).Running() {
		if time.Now().After(deadline) {
			t.Fatalf("%s still runs 60 s after it started on a full disk", c.Node(v).ID)
		}
		time.Sleep(100 * time.Millisecond) // polling a process's exit
	}
	checkFailStop(t, k, v)

	freeDisk()
	rejoin(t, c, v, acked)
}

// fillUp writes path until the file system holding it has no space left.
func fillUp(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	chunk := make([]byte, 1<<20)
	for {
		if _, err = f.Write(chunk); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}

// waitCaughtUp waits until node v has applied what the leader had committed.
func waitCaughtUp(t *testing.T, c *ticketdtest.Cluster, v int) {
	t.Helper()
	l := c.WaitLeader(t, 30*time.Second)
	st, err := c.Status(l)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if sv, err := c.Status(v); err == nil && sv.GetAppliedIndex() >= st.GetCommitIndex() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not catch up to index %d in 60 s", c.Node(v).ID, st.GetCommitIndex())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tailOf returns the last n bytes of b.
func tailOf(b []byte, n int) string {
	return string(b[max(0, len(b)-n):])
}
