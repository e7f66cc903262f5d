package hashicorp

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/metadb"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/internal/watermark"
)

// walWithEntries writes entries 1-100 in batches of 10 to a new wal store
// in a fresh data dir, closes it, and returns the data dir and the store's
// directory.
func walWithEntries(t *testing.T) (dataDir, walDir string) {
	t.Helper()
	dataDir = t.TempDir()
	s := openTestStore(t, backends.LogStoreWAL, dataDir)
	for i := uint64(1); i <= 100; i += 10 {
		must(t, s.StoreLogs(entries(i, i+9)))
	}
	closeStore(t, s)
	return dataDir, backends.LogStoreDir(dataDir, BackendName, backends.LogStoreWAL)
}

func openWAL(dataDir string) (nodeStore, error) {
	return openStore(backends.Config{DataDir: dataDir, LogStore: backends.LogStoreWAL}, zap.NewNop(), newHCLog(zap.NewNop()))
}

// TestWALDamagedEntryRefused flips one byte of an entry in an early batch
// of the tail segment (raft-wal checks only the last batch's CRC when it
// opens): the store refuses to open, naming the entry, instead of serving
// it.
func TestWALDamagedEntryRefused(t *testing.T) {
	dataDir, walDir := walWithEntries(t)
	segs, err := filepath.Glob(filepath.Join(walDir, "*.wal"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v, %v; want one", segs, err)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, []byte("data-15"))
	if at < 0 {
		t.Fatal("entry 15 not found in the segment")
	}
	b[at+5] ^= 0x01 // "data-15" becomes "data-05"
	if err := os.WriteFile(segs[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := openWAL(dataDir)
	if err == nil {
		_ = s.Close()
		t.Fatal("a wal store with a damaged entry 15 opened")
	}
	var hole *watermark.HoleError
	if !errors.As(err, &hole) || !errors.Is(err, watermark.ErrLogShortened) || !strings.Contains(err.Error(), "entry 15 ") {
		t.Fatalf("open with a damaged entry 15: %v, want a *watermark.HoleError naming entry 15", err)
	}
}

// TestWALMissingMetaRefused deletes the meta database that lists the
// segments: the store refuses to open and leaves the segments in place
// (raft-wal would start an empty log and delete them as leftovers).
func TestWALMissingMetaRefused(t *testing.T) {
	dataDir, walDir := walWithEntries(t)
	if err := os.Remove(filepath.Join(walDir, metadb.FileName)); err != nil {
		t.Fatal(err)
	}
	s, err := openWAL(dataDir)
	if err == nil {
		_ = s.Close()
		t.Fatal("a wal store without its meta database opened")
	}
	if !errors.Is(err, watermark.ErrLogShortened) || !strings.Contains(err.Error(), metadb.FileName) {
		t.Fatalf("open without %s: %v, want a refusal naming it", metadb.FileName, err)
	}
	if segs, _ := filepath.Glob(filepath.Join(walDir, "*.wal")); len(segs) == 0 {
		t.Fatal("the refused open deleted the segments")
	}
}

// TestSealEntries: a sealed entry reads back as the original, the
// original is not modified, and any changed field fails the CRC.
func TestSealEntries(t *testing.T) {
	orig := entry(7)
	sealed := sealEntries(entries(7, 7))[0]
	if !sameLog(orig, entry(7)) {
		t.Fatal("sealEntries modified its input")
	}
	back := *sealed
	if err := openEntry(&back); err != nil || !sameLog(&back, orig) {
		t.Fatalf("openEntry = %+v, %v; want %+v", back, err, orig)
	}
	for name, change := range map[string]func(c *struct{ term, index uint64 }){
		"term":  func(c *struct{ term, index uint64 }) { c.term++ },
		"index": func(c *struct{ term, index uint64 }) { c.index++ },
	} {
		c := struct{ term, index uint64 }{sealed.Term, sealed.Index}
		change(&c)
		bad := *sealed
		bad.Term, bad.Index = c.term, c.index
		if err := openEntry(&bad); !errors.Is(err, errEntryChecksum) {
			t.Fatalf("%s changed: openEntry = %v, want errEntryChecksum", name, err)
		}
	}
}

// TestSealEntriesBatch: the entries of one batch are sealed into shared
// arrays, four allocations whatever the batch's length, each Data capped
// at its own end so that growing one never writes into the next, and each
// reads back as its original.
func TestSealEntriesBatch(t *testing.T) {
	batch := entries(10, 41)
	if allocs := testing.AllocsPerRun(20, func() { sealEntries(batch) }); allocs > 4 {
		t.Fatalf("sealing %d entries made %.0f allocations, want at most 4", len(batch), allocs)
	}
	sealed := sealEntries(batch)
	_ = append(sealed[0].Data, 0xff, 0xff, 0xff, 0xff)
	for i, l := range sealed {
		back := *l
		if err := openEntry(&back); err != nil || !sameLog(&back, batch[i]) {
			t.Fatalf("entry %d: openEntry = %+v, %v; want %+v", l.Index, back, err, batch[i])
		}
	}
}

// storedFirst is raft-wal's own first index under s (a wal store), before
// the compactions DeleteRange keeps in memory.
func storedFirst(t *testing.T, s nodeStore) uint64 {
	t.Helper()
	first, err := s.(*walStore).w.FirstIndex()
	must(t, err)
	return first
}

// TestWALCompactionInMemory: a compaction that frees no whole segment
// deletes its prefix for the log's readers at once, leaves raft-wal (and
// its meta database, whose commit would hold up the appends) alone until
// Close, and a compaction past a sealed segment tells raft-wal, which
// removes the segment.
func TestWALCompactionInMemory(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, backends.LogStoreWAL, dir)
	must(t, s.StoreLogs(entries(1, 100)))
	must(t, s.DeleteRange(1, 60))
	requireBounds(t, s, 61, 100)
	requireLogs(t, s, 55, 100, between(61, 100))
	if got := storedFirst(t, s); got != 1 {
		t.Fatalf("raft-wal's first index %d after a compaction inside one segment, want 1 (untouched)", got)
	}
	must(t, s.StoreLogs(entries(101, 110)))
	must(t, s.DeleteRange(61, 80))
	requireBounds(t, s, 81, 110)
	closeStore(t, s)

	s = openTestStore(t, backends.LogStoreWAL, dir)
	requireBounds(t, s, 81, 110)
	requireLogs(t, s, 75, 110, between(81, 110))

	// Past the first segment: 16 entries of 1 MiB fill it.
	big := make([]byte, 1<<20)
	for i := uint64(111); i <= 130; i++ {
		l := entry(i)
		l.Data = big
		must(t, s.StoreLogs([]*raft.Log{l}))
	}
	segs, err := filepath.Glob(filepath.Join(backends.LogStoreDir(dir, BackendName, backends.LogStoreWAL), "*.wal"))
	must(t, err)
	if len(segs) < 2 {
		t.Fatalf("%d segment files after 20 MiB of entries, want at least 2", len(segs))
	}
	must(t, s.DeleteRange(81, 129))
	requireBounds(t, s, 130, 130)
	if got := storedFirst(t, s); got <= 81 {
		t.Fatalf("raft-wal's first index %d after a compaction past a sealed segment, want it told (> 81)", got)
	}

	// The whole log, as raft deletes it after installing a snapshot.
	must(t, s.DeleteRange(130, 130))
	requireBounds(t, s, 0, 0)
	closeStore(t, s)
}
