package backendtest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/internal/watermark"
	"github.com/ticketd/ticketd/core"
)

// watermarkLosses are the ways a stopped node's watermark file goes: deleted
// (a lost directory entry, a data dir copied without it), cut to 0 bytes (a
// file that comes back empty after a crash), overwritten with garbage.
var watermarkLosses = []struct {
	name string
	lose func(path string) error
}{
	{"deleted", os.Remove},
	{"empty", func(path string) error { return os.Truncate(path, 0) }},
	{"garbage", func(path string) error { return os.WriteFile(path, []byte("garbage, not a watermark"), 0o600) }},
}

// requireRefusedMissing fails t unless err is a refused start for a
// missing watermark whose message says what is missing and how to recover.
func requireRefusedMissing(t *testing.T, err error, how string) {
	t.Helper()
	if err == nil {
		t.Fatalf("node started with its watermark %s; want a refused start", how)
	}
	if !errors.Is(err, watermark.ErrMissing) {
		t.Fatalf("start with the watermark %s: %v, want watermark.ErrMissing", how, err)
	}
	for _, want := range []string{watermark.FileName, "RemoveMember", "empty data dir", "--accept-missing-watermark"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("refusal does not say %q: %v", want, err)
		}
	}
}

// testMissingWatermarkRefused: a stopped follower whose watermark file is
// deleted, emptied or overwritten refuses to start, saying what is missing
// and how to recover; with AcceptMissingWatermark it starts, logs a warn
// audit line, writes a fresh mark and catches up; the next start without
// the flag finds that mark. (A fresh data dir starts without any: Start.)
func testMissingWatermarkRefused(t *testing.T, open Factory) {
	ctx := testContext(t)
	audit, logs := observer.New(zapcore.WarnLevel)
	accept := map[string]bool{}
	c := NewCluster(t, open)
	c.Tune = func(cfg *backends.Config) {
		cfg.AcceptMissingWatermark = accept[cfg.ID]
		cfg.Logger = zap.New(audit)
	}
	c.Start(3)
	l := c.WaitLeader()
	grantMany(ctx, t, c, "wm", 30)
	settle(c)
	f := follower(c, l)
	c.Kill(f)
	path := filepath.Join(f.DataDir, watermark.FileName)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, loss := range watermarkLosses {
		if err := loss.lose(path); err != nil {
			t.Fatal(err)
		}
		err := c.Reopen(f)
		requireRefusedMissing(t, err, loss.name)
		t.Logf("%s: refused: %v", loss.name, err)
		if err := os.WriteFile(path, orig, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	accept[f.ID] = true
	before := logs.Len()
	c.Restart(f)
	lines := logs.All()[before:]
	found := slices.ContainsFunc(lines, func(e observer.LoggedEntry) bool {
		return e.Level == zapcore.WarnLevel && strings.Contains(e.Message, "accept-missing-watermark") &&
			e.ContextMap()["data_dir"] == f.DataDir
	})
	if !found {
		t.Fatalf("started with --accept-missing-watermark without a warn audit line naming %s: %+v", f.DataDir, lines)
	}
	grantMany(ctx, t, c, "accepted", 3)
	settle(c)
	c.Kill(f)
	accept[f.ID] = false
	c.Restart(f) // the fresh mark is found
	settle(c)
	c.EnsureSame()
}

// storeFileKinds are kinds of file (see fileKinds) that a data dir of each
// log store must hold for testFileLossNeverShortens to cover it: badger's
// MANIFEST, a table and a memtable log; a write-ahead log segment (both
// backends' WALs; hashicorp's raft-wal also has its wal-meta.db, etcd's
// its snapshot files).
var storeFileKinds = map[string][]string{
	backends.LogStoreBadger: {"MANIFEST", ".sst", ".mem"},
	backends.LogStoreWAL:    {".wal"},
}

// testFileLossNeverShortens: each kind of file in a data dir (the
// watermark, the log store record, badger's MANIFEST, KEYREGISTRY, DISCARD,
// a table, a value log, a memtable log, or raft-wal's meta database and a
// segment, a snapshot's files) is deleted in turn from crash images
// of both followers, the leader is stopped, and the two followers are
// started on the images: each must refuse to start with an error that says
// how to recover, or start with a complete log, so every acknowledged grant
// is still held with its token once they elect a leader (a short log that
// wins would lose some and reissue their tokens, as the two followers form
// a quorum without the leader).
func testFileLossNeverShortens(t *testing.T, open Factory) {
	ctx := testContext(t)
	c := NewCluster(t, open)
	c.Tune = func(cfg *backends.Config) {
		cfg.SnapshotThreshold = 40 // snapshots and compaction happen
		cfg.TrailingLogs = 10
	}
	c.Start(3)
	l := c.WaitLeader()
	grantMany(ctx, t, c, "old", 100)
	settle(c)
	// Stop and restart the followers so badger flushes its memtable into
	// tables, then add entries that stay in the memtable log.
	for _, f := range c.Followers(l) {
		c.Kill(f)
		c.Restart(f)
	}
	grantMany(ctx, t, c, "new", 30)
	settle(c)
	acked := map[string]uint64{}
	l.StateMachine().Ascend(func(lk core.Lock) bool {
		acked[lk.Key] = lk.Token
		return true
	})
	pair := c.Followers(l)
	img := t.TempDir()
	for _, f := range pair {
		CrashImage(t, f.DataDir, filepath.Join(img, f.ID))
	}
	c.Kill(l)
	for _, f := range pair {
		c.Kill(f)
	}
	kinds := fileKinds(t, filepath.Join(img, pair[0].ID))
	t.Logf("file kinds in a data dir: %v", slices.Sorted(func(yield func(string) bool) {
		for k := range kinds {
			if !yield(k) {
				return
			}
		}
	}))
	store, err := backends.ReadLogStore(pair[0].DataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range append([]string{watermark.FileName, backends.LogStoreFile}, storeFileKinds[store]...) {
		if _, ok := kinds[want]; !ok {
			t.Fatalf("no %s in the data dir image; the test would not cover it", want)
		}
	}
	for kind := range kinds {
		var started, refused []*Peer
		var errs []error
		for _, f := range pair {
			if err := os.RemoveAll(f.DataDir); err != nil {
				t.Fatal(err)
			}
			copyTree(t, filepath.Join(img, f.ID), f.DataDir)
			// The other image may lack a kind that only exists for a
			// moment (a snapshot's temporary file): it starts as it is.
			if victim, ok := fileKinds(t, f.DataDir)[kind]; ok {
				if err := os.Remove(victim); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Reopen(f); err != nil {
				refused = append(refused, f)
				errs = append(errs, err)
				continue
			}
			started = append(started, f)
		}
		for _, err := range errs {
			if !strings.Contains(err.Error(), "RemoveMember") {
				t.Errorf("%s deleted: refused without saying how to recover: %v", kind, err)
			}
		}
		if len(started) == len(pair) {
			nl := c.WaitLeader(started...)
			c.WaitApplied(nl.StateMachine().AppliedIndex(), started...)
			for key, tok := range acked {
				if lk, ok := nl.StateMachine().Get(key); !ok || lk.Token != tok {
					t.Errorf("%s deleted: the followers started and lost acknowledged grant %s token %d (now %+v, %v)", kind, key, tok, lk, ok)
				}
			}
		}
		t.Logf("%s deleted: %d started, %d refused %v", kind, len(started), len(refused), errs)
		for _, f := range started {
			c.Kill(f)
		}
	}
}

// fileKinds maps each kind of file under dataDir to the newest file of
// that kind: top-level files and badger's named files by name, numbered
// files by extension, and the files under snapshots/ the same way with
// "snapshot " in front (hashicorp's state.bin and meta.json of the newest
// snapshot, the etcd badger store's one <term>-<index>.snap).
func fileKinds(t *testing.T, dataDir string) map[string]string {
	t.Helper()
	kinds := map[string]string{}
	err := filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		kind := d.Name()
		if ext := filepath.Ext(kind); ext != "" {
			kind = ext
		}
		if rel, _ := filepath.Rel(dataDir, path); strings.HasPrefix(rel, "snapshots"+string(filepath.Separator)) {
			kind = "snapshot " + kind
		}
		if old, ok := kinds[kind]; !ok || path > old {
			kinds[kind] = path // names are zero-padded numbers or times: the last is the newest
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return kinds
}

// copyTree copies the directory src to dst (files and directories only).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}
