package hashicorp

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/internal/badgerlog"
)

// openSnapshotStore opens the snapshot store of a node whose data dir is dir.
func openSnapshotStore(t *testing.T, dir string) *snapshotStore {
	t.Helper()
	s, err := newSnapshotStore(dir, snapshotRetain, newHCLog(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSnapshotStoreFourSyncsPerSnapshot: a snapshot written as raft writes
// one (Create, Write, Close, and Close again) costs exactly four syncs —
// state.bin, meta.json, the .tmp directory, the snapshots directory — and
// is then read back whole by hashicorp's own FileSnapshotStore (whose Open
// checks the CRC), with the data dir's modes on everything it created.
func TestSnapshotStoreFourSyncsPerSnapshot(t *testing.T) {
	dir := t.TempDir()
	s := openSnapshotStore(t, dir)
	state := bytes.Repeat([]byte("ticketd snapshot "), 1000)
	conf := raft.Configuration{Servers: []raft.Server{
		{ID: "n1", Address: "127.0.0.1:1", Suffrage: raft.Voter},
		{ID: "n2", Address: "127.0.0.1:2", Suffrage: raft.Nonvoter},
	}}
	sink, err := s.Create(raft.SnapshotVersionMax, 42, 7, conf, 40, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write(state); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if got := s.syncs.Load(); got != 4 {
		t.Fatalf("one snapshot made %d syncs, want 4", got)
	}

	fs, err := raft.NewFileSnapshotStoreWithLogger(dir, snapshotRetain, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	metas, err := fs.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(metas) != 1 || metas[0].ID != sink.ID() {
		t.Fatalf("FileSnapshotStore lists %+v, want the one snapshot %s", metas, sink.ID())
	}
	meta, rc, err := fs.Open(sink.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, state) {
		t.Fatalf("state read back differs: %d bytes, want %d", len(got), len(state))
	}
	if meta.Index != 42 || meta.Term != 7 || meta.ConfigurationIndex != 40 || meta.Size != int64(len(state)) ||
		meta.Version != raft.SnapshotVersionMax || len(meta.Configuration.Servers) != 2 ||
		meta.Configuration.Servers[1].Suffrage != raft.Nonvoter {
		t.Fatalf("meta read back: %+v", meta)
	}
	snapDir := filepath.Join(badgerlog.SnapshotDir(dir), sink.ID())
	for path, want := range map[string]os.FileMode{
		snapDir: backends.DataDirMode,
		filepath.Join(snapDir, snapshotStateFile): backends.DataFileMode,
		filepath.Join(snapDir, snapshotMetaFile):  backends.DataFileMode,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", path, fi.Mode().Perm(), want)
		}
	}
}

// TestSnapshotStoreCancelAndRetention: a cancelled snapshot leaves nothing
// behind, and of several completed ones only the newest snapshotRetain
// remain on disk.
func TestSnapshotStoreCancelAndRetention(t *testing.T) {
	dir := t.TempDir()
	s := openSnapshotStore(t, dir)
	sink, err := s.Create(raft.SnapshotVersionMax, 5, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("abandoned")); err != nil {
		t.Fatal(err)
	}
	if err := sink.Cancel(); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(s.dir); err != nil || len(ents) != 0 {
		t.Fatalf("after Cancel the snapshots directory holds %v (%v), want nothing", ents, err)
	}
	if _, err := s.Create(0, 6, 1, raft.Configuration{}, 1, nil); err == nil {
		t.Fatal("Create of a version 0 snapshot succeeded")
	}

	var ids []string
	for i := uint64(1); i <= snapshotRetain+2; i++ {
		sink, err := s.Create(raft.SnapshotVersionMax, 10*i, 1, raft.Configuration{}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sink.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sink.ID())
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	want := ids[len(ids)-snapshotRetain:]
	if len(names) != len(want) || names[0] != want[0] || names[1] != want[1] {
		t.Fatalf("snapshots directory holds %v, want the newest %d: %v", names, snapshotRetain, want)
	}
}
