package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/internal/badgerlog"
	"github.com/ticketd/ticketd/backends/internal/watermark"
	"github.com/ticketd/ticketd/core"
)

// grantMany grants keys prefix000..prefix(n-1) through the cluster's leader.
func grantMany(ctx context.Context, t *testing.T, c *Cluster, prefix string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("%s%03d", prefix, i)
		if res, err := c.Propose(ctx, grant(key)); err != nil || res.Outcome != core.OutcomeGranted {
			t.Fatalf("grant %s: %+v, %v", key, res, err)
		}
	}
}

// settle waits until every live peer has applied what the leader has.
func settle(c *Cluster) {
	l := c.WaitLeader()
	c.WaitApplied(l.StateMachine().AppliedIndex())
}

// testRecoveredCommitIndex (docs/design.md#reads): a node restarted cut off
// from the others reports in Status().RecoveredCommitIndex at least the index
// it had applied before it stopped, so the server can refuse stale reads while
// AppliedIndex is below it; once the partition heals, the node replays past
// it.
func testRecoveredCommitIndex(t *testing.T, open Factory) {
	ctx := testContext(t)
	c := NewCluster(t, open)
	c.Start(3)
	l := c.WaitLeader()
	grantMany(ctx, t, c, "rec", 30)
	settle(c)
	f := follower(c, l)
	before := f.StateMachine().AppliedIndex()
	c.Kill(f)
	c.Partition(f)
	c.Restart(f)
	st := f.Node().Status()
	if st.RecoveredCommitIndex == 0 || st.RecoveredCommitIndex < before {
		t.Fatalf("restarted: RecoveredCommitIndex %d, want at least the applied index %d before the stop", st.RecoveredCommitIndex, before)
	}
	t.Logf("restarted cut off: applied %d, recovered %d", st.AppliedIndex, st.RecoveredCommitIndex)
	c.Heal()
	c.waitFor("replay past the recovered index", func() bool {
		st := f.Node().Status()
		return st.AppliedIndex >= st.RecoveredCommitIndex
	})
	if got := f.Node().Status().RecoveredCommitIndex; got != st.RecoveredCommitIndex {
		t.Fatalf("RecoveredCommitIndex changed from %d to %d while running", st.RecoveredCommitIndex, got)
	}
}

// CrashImage copies the data dir of a running node to dst as a crash would
// leave it: the watermark first, then every other file (badger's mmap'd
// files are read through the page cache, as after kill -9). Writes must be
// quiet meanwhile.
func CrashImage(t *testing.T, src, dst string) {
	t.Helper()
	copyFile := func(path string) {
		rel, err := filepath.Rel(src, path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o750); err != nil {
			t.Fatal(err)
		}
		in, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = in.Close() }()
		out, err := os.Create(filepath.Join(dst, rel))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	wm := filepath.Join(src, watermark.FileName)
	copyFile(wm)
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path == wm || strings.HasSuffix(path, ".lock") || d.Name() == "LOCK" {
			return err
		}
		copyFile(path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// damageNewestLog flips 4 bytes of an entry's data about 1.5 KiB before
// the end of the data in the file of dataDir's log store that holds the
// newest appends (backends.NewestLogFile), as a failing disk would: the
// first 4 bytes of the last copy of keyPrefix (a key every entry there
// holds) that starts at least 1.5 KiB before the end. Damage must fall on
// an entry's bytes: a flip in a log format's framing or padding (raft-wal
// pads its frames to 8 bytes and checks an older batch's commit CRC only
// when that batch is the last) leaves every entry intact, and a node that
// starts with it has lost nothing. It returns the file and offset.
func damageNewestLog(t *testing.T, dataDir, keyPrefix string) (string, int) {
	t.Helper()
	path, _, err := backends.NewestLogFile(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := len(bytes.TrimRight(b, "\x00"))
	if end < 4096 {
		t.Fatalf("%s holds only %d bytes of records", path, end)
	}
	off := bytes.LastIndex(b[:end-1500+len(keyPrefix)], []byte(keyPrefix))
	if off < 0 || len(keyPrefix) < 4 {
		t.Fatalf("%s: no entry holding %q before its last 1.5 KiB (or a prefix shorter than the 4 bytes to flip)", path, keyPrefix)
	}
	for i := off; i < off+4; i++ {
		b[i] ^= 0xA5
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, off
}

// testDamagedLogRefused (docs/design.md#storage-and-recovery): the file
// holding a follower's newest appends is damaged near its end after a crash;
// badger (its memtable log) and raft-wal (its tail segment: the damaged
// batch's CRC fails, and it keeps only the batches before it) would replay the
// log only up to the damage and drop the rest without an error, so the node
// must refuse to start, naming the gap (or, for the write-ahead log
// stores, which read every entry at start, the damaged entry) and how to
// recover, instead of rejoining with a shorter or damaged log. An
// undamaged crash image of the same node starts.
func testDamagedLogRefused(t *testing.T, open Factory) {
	ctx := testContext(t)
	c := NewCluster(t, open)
	c.Start(3)
	l := c.WaitLeader()
	grantMany(ctx, t, c, "dmg", 120)
	settle(c)
	f := follower(c, l)
	// The damage below falls on the follower's last entries. Its watermark
	// trails the log by about watermark.AdvanceDelay plus one synced write
	// (docs/design.md#storage-and-recovery), a window this check does not
	// cover by design: wait until the stored mark covers every committed
	// entry, so the image is a crash after the mark's write.
	last := l.Node().Status().CommitIndex
	c.waitFor(fmt.Sprintf("follower %s's watermark at index %d", f.ID, last), func() bool {
		m, err := watermark.Read(f.DataDir)
		return err == nil && m.LastIndex >= last
	})
	img := t.TempDir()
	CrashImage(t, f.DataDir, filepath.Join(img, "clean"))
	CrashImage(t, f.DataDir, filepath.Join(img, "damaged"))
	c.Kill(f)

	swap := func(dir string) {
		if err := os.RemoveAll(f.DataDir); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(dir, f.DataDir); err != nil {
			t.Fatal(err)
		}
	}
	swap(filepath.Join(img, "clean"))
	c.Restart(f)
	c.Kill(f)

	swap(filepath.Join(img, "damaged"))
	file, off := damageNewestLog(t, f.DataDir, "dmg0")
	err := c.Reopen(f)
	if err == nil {
		t.Fatalf("node started with 4 bytes flipped at offset %d of %s; want a refused start", off, file)
	}
	var gap *watermark.GapError
	var hole *watermark.HoleError
	if !errors.Is(err, watermark.ErrLogShortened) || !errors.As(err, &gap) && !errors.As(err, &hole) {
		t.Fatalf("start with a damaged log: %v, want a *watermark.GapError (a log cut short at the damage) or a *watermark.HoleError (a damaged entry found)", err)
	}
	if !strings.Contains(err.Error(), "RemoveMember") {
		t.Fatalf("refusal does not say how to recover: %v", err)
	}
	t.Logf("refused: %v", err)
	// The rest of the cluster still commits.
	grantMany(ctx, t, c, "after", 3)
}

// fatalLog records the errors Config.OnFatal reported, per node.
type fatalLog struct {
	mu   sync.Mutex
	errs map[string][]error
}

func (l *fatalLog) tune(cfg *backends.Config) {
	id := cfg.ID
	cfg.OnFatal = func(err error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.errs[id] = append(l.errs[id], err)
	}
}

func (l *fatalLog) get(id string) []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errs[id])
}

// waitDiskFull waits until p has called OnFatal, and fails the test unless it
// did so once, with an error that says the disk is full.
func (l *fatalLog) waitDiskFull(c *Cluster, p *Peer) {
	c.t.Helper()
	c.waitFor("OnFatal on "+p.ID, func() bool { return len(l.get(p.ID)) > 0 })
	errs := l.get(p.ID)
	if len(errs) != 1 || !errors.Is(errs[0], badgerlog.ErrDiskFull) || !strings.Contains(errs[0].Error(), "disk full") {
		c.t.Fatalf("%s: OnFatal got %v, want one error saying the disk is full", p.ID, errs)
	}
}

// fillDisk makes the file system of dataDir look nearly full (4096 bytes
// free, far below badgerlog.ReserveBytes) to the storage layer's reserve
// check, for the rest of the test: a full disk injected below the layer
// under test (badgerlog.FreeBytes).
func fillDisk(t *testing.T, dataDir string) {
	orig := badgerlog.FreeBytes
	t.Cleanup(func() { badgerlog.FreeBytes = orig })
	badgerlog.FreeBytes = func(dir string) (uint64, error) {
		if strings.HasPrefix(dir, dataDir+string(filepath.Separator)) || dir == dataDir {
			return 4096, nil
		}
		return orig(dir)
	}
}

// testDiskFullStops (docs/design.md#storage-and-recovery): when the leader's
// disk is (nearly) full, its next write fails, it calls OnFatal once with an
// error that says the disk is full, refuses every later call with
// core.ErrStopped (no zombie), and the others elect a new leader. The full
// disk is injected below the storage layer (badgerlog.FreeBytes).
func testDiskFullStops(t *testing.T, open Factory) {
	ctx := testContext(t)
	fatal, c, l := startFatalWatched(ctx, t, open, "full")

	fillDisk(t, l.DataDir)
	pctx, cancel := context.WithTimeout(ctx, 2*ElectionTimeout)
	_, err := l.Node().Propose(pctx, grant("full-disk"))
	cancel()
	if err == nil {
		t.Fatal("grant on a leader with a full disk succeeded")
	}
	others := fatal.checkStoppedFull(ctx, t, c, l)
	nl := c.WaitLeader(others...)
	if _, err := nl.Node().Propose(ctx, grant("on-new-leader")); err != nil {
		t.Fatalf("grant on the new leader: %v", err)
	}
	fatal.checkNone(t, others)
}

// startFatalWatched starts a three-node cluster whose OnFatal calls fatal
// records, waits for its leader and commits five grants under prefix.
func startFatalWatched(ctx context.Context, t *testing.T, open Factory, prefix string) (*fatalLog, *Cluster, *Peer) {
	t.Helper()
	fatal := &fatalLog{errs: map[string][]error{}}
	c := NewCluster(t, open)
	c.Tune = fatal.tune
	c.Start(3)
	l := c.WaitLeader()
	grantMany(ctx, t, c, prefix, 5)
	return fatal, c, l
}

// checkStoppedFull waits until p has stopped through OnFatal saying its
// disk is full and refuses every call with core.ErrStopped, and returns the
// other live peers.
func (f *fatalLog) checkStoppedFull(ctx context.Context, t *testing.T, c *Cluster, p *Peer) []*Peer {
	t.Helper()
	f.waitDiskFull(c, p)
	c.waitFor("calls refused with ErrStopped", func() bool {
		_, err := p.Node().Propose(ctx, grant("after-full"))
		return errors.Is(err, core.ErrStopped) && errors.Is(p.Node().ReadIndex(ctx), core.ErrStopped)
	})
	return c.Followers(p)
}

// checkNone fails t if any of peers called OnFatal.
func (f *fatalLog) checkNone(t *testing.T, peers []*Peer) {
	t.Helper()
	for _, p := range peers {
		if errs := f.get(p.ID); len(errs) != 0 {
			t.Fatalf("%s: OnFatal %v without a fault", p.ID, errs)
		}
	}
}

// testDiskFullRestartStops (docs/design.md#storage-and-recovery): a node
// restarted on a full disk, with the rest of the cluster restarted beside it,
// either refuses to open its store, saying the disk is full (badger checks
// the reserve at Open), or takes part in the election before anything is
// appended to it: it writes a
// new term (as a candidate, or as a voter asked for its vote; Raft thesis
// §3.4: persisted before it answers) where the store checks the reserve,
// and otherwise appends the new leader's first entries. Either write fails,
// and the node stops through OnFatal, once, saying the disk is full, and
// refuses every call with core.ErrStopped; it never panics (a failed term
// write reaching hashicorp/raft would, and end the test binary). The other
// two elect a leader and commit.
func testDiskFullRestartStops(t *testing.T, open Factory) {
	ctx := testContext(t)
	fatal, c, l := startFatalWatched(ctx, t, open, "before")
	settle(c)
	full := follower(c, l)
	for _, p := range c.Live() {
		c.Kill(p)
	}
	fillDisk(t, full.DataDir)
	for _, p := range c.Peers() {
		if p != full {
			c.Restart(p)
		}
	}
	var others []*Peer
	switch err := c.Reopen(full); {
	case err == nil:
		others = fatal.checkStoppedFull(ctx, t, c, full)
	case errors.Is(err, badgerlog.ErrDiskFull) && strings.Contains(err.Error(), "disk full"):
		// The store checks the reserve before it opens (badger, which
		// would otherwise map new files it cannot fill): the node
		// refuses to start, saying why, which is the earliest stop.
		others = c.Live()
	default:
		t.Fatalf("restart %s on a full disk: %v, want it to stop saying the disk is full", full.ID, err)
	}
	c.WaitLeader(others...)
	// Through whichever of the others leads by then (c.Propose retries): on
	// raft-wal the full node's term writes succeed (no reserve check), so it
	// may campaign once more before its first append stops it.
	if res, err := c.Propose(ctx, grant("on-new-leader")); err != nil || res.Outcome != core.OutcomeGranted {
		t.Fatalf("grant on the new leader: %+v, %v", res, err)
	}
	fatal.checkNone(t, others)
}
