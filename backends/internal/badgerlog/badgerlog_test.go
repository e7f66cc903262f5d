package badgerlog

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestOpenRecordsBackend(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, "hashicorp", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		backend string
		wantErr error
	}{
		{"same_backend_reopens", "hashicorp", nil},
		{"other_backend_refused", "etcd", ErrWrongBackend},
		{"same_backend_after_refusal", "hashicorp", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(dir, tt.backend, nil)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Open(%q) = %v, want %v", tt.backend, err, tt.wantErr)
			}
			if err != nil {
				const want = "data dir was written by the hashicorp backend; refusing to open it with etcd"
				if !bytes.Contains([]byte(err.Error()), []byte(want)) {
					t.Fatalf("error %q does not say %q", err, want)
				}
				return
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestOpenRejectsEmptyBackend(t *testing.T) {
	if _, err := Open(t.TempDir(), "", nil); err == nil {
		t.Fatal("Open with an empty backend name succeeded")
	}
}

func TestIndexKey(t *testing.T) {
	prefix := []byte("log/")
	indexes := []uint64{0, 1, 2, 255, 256, 1 << 32, ^uint64(0)}
	var keys [][]byte
	for _, i := range indexes {
		k := IndexKey(prefix, i)
		got, err := ParseIndexKey(prefix, k)
		if err != nil || got != i {
			t.Fatalf("ParseIndexKey(IndexKey(%d)) = %d, %v", i, got, err)
		}
		keys = append(keys, k)
	}
	if !slices.IsSortedFunc(keys, bytes.Compare) {
		t.Fatal("index keys do not sort in index order")
	}
	bad := []struct {
		name string
		key  []byte
	}{
		{"short", []byte("log/1234567")},
		{"long", []byte("log/123456789")},
		{"other_prefix", []byte("xxx/12345678")},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseIndexKey(prefix, tt.key); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ParseIndexKey(%q) = %v, want ErrCorrupt", tt.key, err)
			}
		})
	}
}

func TestUint64(t *testing.T) {
	b := EncodeUint64(0x0102030405060708)
	if !bytes.Equal(b, []byte{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Fatalf("EncodeUint64 = %x, want big-endian", b)
	}
	if v, err := DecodeUint64(b); err != nil || v != 0x0102030405060708 {
		t.Fatalf("DecodeUint64 = %x, %v", v, err)
	}
	if _, err := DecodeUint64([]byte{1, 2, 3}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("DecodeUint64 of 3 bytes = %v, want ErrCorrupt", err)
	}
}

func TestFirstLastIndex(t *testing.T) {
	db, err := Open(t.TempDir(), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	prefix, other := []byte("a/"), []byte("b/")
	stored := []uint64{3, 4, 9, 20}
	err = Batch(db, len(stored), func(txn *badger.Txn, i int) error {
		if err := txn.Set(IndexKey(other, stored[i]-1), nil); err != nil {
			return err
		}
		return txn.Set(IndexKey(prefix, stored[i]), []byte{1})
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		last    bool
		at      uint64
		want    uint64
		wantHit bool
	}{
		{"first_from_zero", false, 0, 3, true},
		{"first_from_hit", false, 9, 9, true},
		{"first_from_gap", false, 5, 9, true},
		{"first_past_end", false, 21, 0, false},
		{"last_from_max", true, ^uint64(0), 20, true},
		{"last_from_gap", true, 8, 4, true},
		{"last_before_start", true, 2, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := db.View(func(txn *badger.Txn) error {
				seek := FirstIndex
				if tt.last {
					seek = LastIndex
				}
				got, ok, err := seek(txn, prefix, tt.at)
				if err != nil {
					return err
				}
				if got != tt.want || ok != tt.wantHit {
					t.Fatalf("seek(%d) = %d, %v; want %d, %v", tt.at, got, ok, tt.want, tt.wantHit)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestBatchSplitsBigTransactions writes more than badger accepts in one
// transaction: Batch must split it and still store everything durably.
func TestBatchSplitsBigTransactions(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte{7}, 64<<10)
	n := int(db.MaxBatchSize()/int64(len(value))) * 3 // about three transactions' worth
	commits := 0
	err = Batch(db, n, func(txn *badger.Txn, i int) error {
		if i == 0 {
			commits++
		}
		err := txn.Set(IndexKey([]byte("v/"), uint64(i)), value)
		if errors.Is(err, badger.ErrTxnTooBig) {
			commits++
		}
		return err
	})
	if err != nil {
		t.Fatalf("Batch of %d × %d bytes: %v", n, len(value), err)
	}
	if commits < 2 {
		t.Fatalf("Batch used %d transaction(s); the test wants a split", commits)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(txn *badger.Txn) error {
		for i := 0; i < n; i++ {
			item, err := txn.Get(IndexKey([]byte("v/"), uint64(i)))
			if err != nil {
				return err
			}
			if item.ValueSize() != int64(len(value)) {
				t.Fatalf("entry %d has %d bytes", i, item.ValueSize())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestBatchEmpty(t *testing.T) {
	db, err := Open(t.TempDir(), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := Batch(db, 0, nil); err != nil {
		t.Fatal(err)
	}
}

// TestOpenSyncsWrites guards the durability contract: a commit returns only
// after its WAL is synced (a SIGKILL test cannot tell, the page cache survives it).
func TestOpenSyncsWrites(t *testing.T) {
	db, err := Open(t.TempDir(), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if !db.Opts().SyncWrites {
		t.Fatal("badger opened without SyncWrites")
	}
}
