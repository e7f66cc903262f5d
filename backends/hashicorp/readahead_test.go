package hashicorp

import (
	"errors"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/backends/internal/badgerlog"
)

// TestGetLogReadsAhead: reading the log in order, as a restarted node does,
// costs one badger iterator per window of readAheadEntries entries, not one
// point read per entry, and returns every entry as stored.
func TestGetLogReadsAhead(t *testing.T) {
	s := openBadger(t, t.TempDir())
	defer closeStore(t, s)
	const n = 3 * readAheadEntries
	must(t, s.StoreLogs(entries(1, n)))
	var l raft.Log
	for i := uint64(1); i <= n; i++ {
		must(t, s.GetLog(i, &l))
		if !sameLog(&l, entry(i)) {
			t.Fatalf("GetLog(%d) = %+v, want %+v", i, l, entry(i))
		}
	}
	// The first read is not sequential (a point read); the rest come in
	// windows of readAheadEntries.
	if want := uint64(n/readAheadEntries + 1); s.ra.fills == 0 || s.ra.fills > want {
		t.Fatalf("%d entries read in order took %d windows, want 1 to %d", n, s.ra.fills, want)
	}
	if err := s.GetLog(n+1, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog past the end = %v, want ErrLogNotFound", err)
	}
}

// TestReadAheadSeesWrites: a window read before the log changed never
// serves an entry the change replaced or deleted (a follower dropping a
// conflicting suffix and storing the leader's entries at the same indexes).
func TestReadAheadSeesWrites(t *testing.T) {
	s := openBadger(t, t.TempDir())
	defer closeStore(t, s)
	must(t, s.StoreLogs(entries(1, 100)))
	var l raft.Log
	must(t, s.GetLog(1, &l))
	must(t, s.GetLog(2, &l)) // sequential: the window now holds 2-100
	must(t, s.DeleteRange(50, 100))
	if err := s.GetLog(60, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog of a deleted entry = %v, want ErrLogNotFound", err)
	}
	must(t, s.GetLog(3, &l))
	must(t, s.GetLog(4, &l)) // a window again
	replaced := entries(4, 60)
	for _, e := range replaced {
		e.Term, e.Data = 99, []byte("new")
	}
	must(t, s.StoreLogs(replaced))
	for i := uint64(4); i <= 60; i++ {
		must(t, s.GetLog(i, &l))
		if l.Term != 99 || string(l.Data) != "new" {
			t.Fatalf("GetLog(%d) after it was overwritten = term %d %q, want term 99 \"new\"", i, l.Term, l.Data)
		}
	}
}

// TestReadAheadStopsBeforeDamage: a damaged entry inside a window is
// reported when it is asked for, as a point read reports it, and the
// entries before it are served.
func TestReadAheadStopsBeforeDamage(t *testing.T) {
	s := openBadger(t, t.TempDir())
	defer closeStore(t, s)
	must(t, s.StoreLogs(entries(1, 20)))
	must(t, s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(badgerlog.IndexKey(logPrefix, 10), []byte{logVersion, 0, 0x80})
	}))
	s.ra.invalidate() // the test wrote behind the store's back
	var l raft.Log
	for i := uint64(1); i <= 9; i++ {
		must(t, s.GetLog(i, &l))
		if !sameLog(&l, entry(i)) {
			t.Fatalf("GetLog(%d) = %+v, want %+v", i, l, entry(i))
		}
	}
	if err := s.GetLog(10, &l); !errors.Is(err, badgerlog.ErrCorrupt) {
		t.Fatalf("GetLog of the damaged entry = %v, want ErrCorrupt", err)
	}
	must(t, s.GetLog(11, &l))
}
