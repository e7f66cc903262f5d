package backends_test

import (
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/ticketd/ticketd/backends"
)

// TestBadgerOptions pins the settings the Raft logs (and ticketbench's
// storage floor) depend on, and opens a real database with them.
func TestBadgerOptions(t *testing.T) {
	dir := t.TempDir()
	o := backends.BadgerOptions(dir)
	switch {
	case !o.SyncWrites:
		t.Error("SyncWrites is off: an acknowledged entry could be lost on power failure")
	case o.DetectConflicts:
		t.Error("DetectConflicts is on")
	case o.NumVersionsToKeep != 1:
		t.Errorf("NumVersionsToKeep = %d, want 1", o.NumVersionsToKeep)
	case o.Compression != options.None:
		t.Errorf("Compression = %v, want none", o.Compression)
	case o.MemTableSize != 16<<20 || o.ValueLogFileSize != 64<<20:
		t.Errorf("MemTableSize %d, ValueLogFileSize %d; want 16 MiB and 64 MiB", o.MemTableSize, o.ValueLogFileSize)
	case o.Logger != nil:
		t.Error("a logger is set; callers choose their own")
	case o.Dir != dir || o.ValueDir != dir:
		t.Errorf("Dir %q ValueDir %q, want %q", o.Dir, o.ValueDir, dir)
	}
	db, err := badger.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("k"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
