package badgerlog

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/ticketd/ticketd/backends/tmpfstest"
)

// TestOpenOnFullDisk opens a database that has data on a file system with
// a few pages free: badger would map a new memtable log there and die of
// SIGBUS when it wrote to it; Open must instead refuse with ErrDiskFull,
// leave the data as it was, and open it once space is back.
func TestOpenOnFullDisk(t *testing.T) {
	dir := tmpfstest.Mount(t, 2*int(ReserveBytes))
	dataDir := filepath.Join(dir, "node")
	put(t, dataDir, []byte("k"), []byte("v"))
	filler := tmpfstest.Fill(t, dir, 2*int64(os.Getpagesize()))

	db, err := Open(dataDir, "hashicorp", nil)
	if err == nil {
		_ = db.Close()
		t.Fatal("Open on a full disk succeeded")
	}
	if !errors.Is(err, ErrDiskFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Open on a full disk: %v, want ErrDiskFull and ENOSPC", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if got := get(t, dataDir, []byte("k")); string(got) != "v" {
		t.Fatalf("after space came back: k = %q, want %q", got, "v")
	}
}

// TestOpenRefusesBelowReserve checks the same refusal without root: free
// space is read through FreeBytes, here below ReserveBytes, and Open fails
// before badger creates anything in the directory.
func TestOpenRefusesBelowReserve(t *testing.T) {
	orig := FreeBytes
	t.Cleanup(func() { FreeBytes = orig })
	FreeBytes = func(string) (uint64, error) { return ReserveBytes - 1, nil }

	dataDir := t.TempDir()
	if _, err := Open(dataDir, "hashicorp", nil); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Open with %d bytes free: %v, want ErrDiskFull", ReserveBytes-1, err)
	}
	entries, err := os.ReadDir(DBDir(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("Open refused but left %d files in %s", len(entries), DBDir(dataDir))
	}
}

// put opens the database of dataDir, sets key to value durably and closes it.
func put(t *testing.T, dataDir string, key, value []byte) {
	t.Helper()
	db, err := Open(dataDir, "hashicorp", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set(key, value) }); err != nil {
		t.Fatal(err)
	}
}

// get opens the database of dataDir and returns key's value.
func get(t *testing.T, dataDir string, key []byte) []byte {
	t.Helper()
	db, err := Open(dataDir, "hashicorp", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	var v []byte
	if err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		v, err = item.ValueCopy(nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

func closeDB(t *testing.T, db *badger.DB) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
