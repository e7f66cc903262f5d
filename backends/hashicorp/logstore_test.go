package hashicorp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/internal/badgerlog"
	"github.com/ticketd/ticketd/backends/internal/watermark"
)

// openTestStore opens the given log store (backends.LogStores) of a node
// whose data dir is dir, as New does.
func openTestStore(t testing.TB, store, dir string) nodeStore {
	t.Helper()
	s, err := openStore(backends.Config{DataDir: dir, LogStore: store}, zap.NewNop(), newHCLog(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// openBadger opens the badger log store of a node whose data dir is dir.
func openBadger(t testing.TB, dir string) *logStore {
	t.Helper()
	return openTestStore(t, backends.LogStoreBadger, dir).(*logStore)
}

func closeStore(t testing.TB, s nodeStore) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func entry(index uint64) *raft.Log {
	return &raft.Log{
		Index:      index,
		Term:       index/10 + 1,
		Type:       raft.LogType(index % 6),
		Data:       []byte(fmt.Sprintf("data-%d", index)),
		Extensions: []byte(fmt.Sprintf("ext-%d", index)),
		AppendedAt: time.Unix(1700000000, int64(index)),
	}
}

func entries(from, to uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, entry(i))
	}
	return out
}

func sameLog(a, b *raft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type &&
		bytes.Equal(a.Data, b.Data) && bytes.Equal(a.Extensions, b.Extensions) &&
		a.AppendedAt.Equal(b.AppendedAt)
}

func requireBounds(t *testing.T, s nodeStore, first, last uint64) {
	t.Helper()
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if f != first || l != last {
		t.Fatalf("bounds [%d,%d], want [%d,%d]", f, l, first, last)
	}
}

// requireLogs checks that exactly the indexes in present are stored (with
// the contents entry(i)) among [lo, hi].
func requireLogs(t *testing.T, s nodeStore, lo, hi uint64, present func(uint64) bool) {
	t.Helper()
	for i := lo; i <= hi; i++ {
		var l raft.Log
		err := s.GetLog(i, &l)
		switch {
		case present(i) && err != nil:
			t.Fatalf("GetLog(%d): %v", i, err)
		case present(i) && !sameLog(&l, entry(i)):
			t.Fatalf("GetLog(%d) = %+v, want %+v", i, l, entry(i))
		case !present(i) && !errors.Is(err, raft.ErrLogNotFound):
			t.Fatalf("GetLog(%d) = %v, want ErrLogNotFound", i, err)
		}
	}
}

func between(lo, hi uint64) func(uint64) bool {
	return func(i uint64) bool { return i >= lo && i <= hi }
}

func TestLogStore(t *testing.T) {
	tests := []struct {
		name        string
		ops         func(t *testing.T, s nodeStore)
		first, last uint64
		present     func(uint64) bool
		// gaps: the case leaves a hole in the log or deletes from its
		// middle, which only badger accepts (raft-wal is a
		// raft.MonotonicLogStore, and hashicorp/raft never does either
		// to one).
		gaps bool
	}{
		{
			name:    "empty",
			ops:     func(*testing.T, nodeStore) {},
			present: func(uint64) bool { return false },
		},
		{
			name: "store_batch",
			ops: func(t *testing.T, s nodeStore) {
				must(t, s.StoreLogs(entries(1, 10)))
			},
			first: 1, last: 10, present: between(1, 10),
		},
		{
			name: "store_one_by_one",
			ops: func(t *testing.T, s nodeStore) {
				for _, l := range entries(5, 8) {
					must(t, s.StoreLog(l))
				}
			},
			first: 5, last: 8, present: between(5, 8),
		},
		{
			name: "delete_prefix_inclusive",
			ops: func(t *testing.T, s nodeStore) {
				must(t, s.StoreLogs(entries(1, 10)))
				must(t, s.DeleteRange(1, 4))
			},
			first: 5, last: 10, present: between(5, 10),
		},
		{
			name: "delete_suffix_inclusive",
			ops: func(t *testing.T, s nodeStore) {
				must(t, s.StoreLogs(entries(1, 10)))
				must(t, s.DeleteRange(7, 10))
			},
			first: 1, last: 6, present: between(1, 6),
		},
		{
			name: "delete_everything",
			ops: func(t *testing.T, s nodeStore) {
				must(t, s.StoreLogs(entries(1, 10)))
				must(t, s.DeleteRange(0, 100))
			},
			present: func(uint64) bool { return false },
		},
		{
			name: "delete_middle_keeps_bounds", gaps: true,
			ops: func(t *testing.T, s nodeStore) {
				must(t, s.StoreLogs(entries(1, 10)))
				must(t, s.DeleteRange(4, 6))
			},
			first: 1, last: 10, present: func(i uint64) bool { return between(1, 3)(i) || between(7, 10)(i) },
		},
		{
			name: "delete_outside_is_noop",
			ops: func(t *testing.T, s nodeStore) {
				must(t, s.StoreLogs(entries(5, 10)))
				must(t, s.DeleteRange(1, 4))
				must(t, s.DeleteRange(11, 20))
			},
			first: 5, last: 10, present: between(5, 10),
		},
		{
			name: "truncate_then_overwrite",
			ops: func(t *testing.T, s nodeStore) {
				must(t, s.StoreLogs(entries(1, 10)))
				must(t, s.DeleteRange(6, 10))
				must(t, s.StoreLogs(entries(6, 12)))
			},
			first: 1, last: 12, present: between(1, 12),
		},
		{
			name: "gap_after_snapshot_install", gaps: true,
			ops: func(t *testing.T, s nodeStore) {
				must(t, s.StoreLogs(entries(1, 3)))
				must(t, s.StoreLogs(entries(10, 12)))
			},
			first: 1, last: 12, present: func(i uint64) bool { return between(1, 3)(i) || between(10, 12)(i) },
		},
		{
			name: "delete_prefix_across_gap", gaps: true,
			ops: func(t *testing.T, s nodeStore) {
				must(t, s.StoreLogs(entries(1, 3)))
				must(t, s.StoreLogs(entries(10, 12)))
				must(t, s.DeleteRange(1, 5))
			},
			first: 10, last: 12, present: between(10, 12),
		},
		{
			name: "delete_suffix_across_gap", gaps: true,
			ops: func(t *testing.T, s nodeStore) {
				must(t, s.StoreLogs(entries(1, 3)))
				must(t, s.StoreLogs(entries(10, 12)))
				must(t, s.DeleteRange(5, 12))
			},
			first: 1, last: 3, present: between(1, 3),
		},
	}
	for _, store := range backends.LogStores() {
		for _, tt := range tests {
			if tt.gaps && store != backends.LogStoreBadger {
				continue
			}
			t.Run(store+"/"+tt.name, func(t *testing.T) {
				dir := t.TempDir()
				s := openTestStore(t, store, dir)
				tt.ops(t, s)
				requireBounds(t, s, tt.first, tt.last)
				requireLogs(t, s, 0, 15, tt.present)
				closeStore(t, s)

				// A reopened store finds the same log.
				s = openTestStore(t, store, dir)
				defer closeStore(t, s)
				requireBounds(t, s, tt.first, tt.last)
				requireLogs(t, s, 0, 15, tt.present)
			})
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestStoreLogsBiggerThanOneTransaction stores one batch larger than badger's
// transaction limit: it is split, and all of it is stored.
func TestStoreLogsBiggerThanOneTransaction(t *testing.T) {
	dir := t.TempDir()
	s := openBadger(t, dir)
	big := bytes.Repeat([]byte("x"), 64<<10)
	n := uint64(s.db.MaxBatchSize()/int64(len(big)))*2 + 5
	var logs []*raft.Log
	for i := uint64(1); i <= n; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Data: big})
	}
	must(t, s.StoreLogs(logs))
	closeStore(t, s)
	s = openBadger(t, dir)
	defer closeStore(t, s)
	requireBounds(t, s, 1, n)
	for i := uint64(1); i <= n; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, big) {
			t.Fatalf("GetLog(%d): %v (%d bytes)", i, err, len(l.Data))
		}
	}
}

func TestGetLogCorruptIsNotNotFound(t *testing.T) {
	s := openBadger(t, t.TempDir())
	defer closeStore(t, s)
	must(t, s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(badgerlog.IndexKey(logPrefix, 7), []byte{logVersion, 0, 0x80})
	}))
	var l raft.Log
	err := s.GetLog(7, &l)
	if !errors.Is(err, badgerlog.ErrCorrupt) || errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog of a corrupt entry = %v, want ErrCorrupt (not ErrLogNotFound)", err)
	}
}

func TestStableStore(t *testing.T) {
	dir := t.TempDir()
	s := openBadger(t, dir)
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"missing_key_is_empty_without_error", func(t *testing.T) {
			v, err := s.Get([]byte("nope"))
			if err != nil || len(v) != 0 {
				t.Fatalf("Get(missing) = %q, %v; want empty, nil", v, err)
			}
		}},
		{"missing_uint64_is_zero_without_error", func(t *testing.T) {
			v, err := s.GetUint64([]byte("nope"))
			if err != nil || v != 0 {
				t.Fatalf("GetUint64(missing) = %d, %v; want 0, nil", v, err)
			}
		}},
		{"set_get", func(t *testing.T) {
			must(t, s.Set([]byte("LastVoteCand"), []byte("n2")))
			if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "n2" {
				t.Fatalf("Get = %q, %v", v, err)
			}
		}},
		{"uint64_big_endian", func(t *testing.T) {
			must(t, s.SetUint64([]byte("CurrentTerm"), 0x0102))
			raw, err := s.Get([]byte("CurrentTerm"))
			if err != nil || !bytes.Equal(raw, []byte{0, 0, 0, 0, 0, 0, 1, 2}) {
				t.Fatalf("stored uint64 = %x, %v; want 8 big-endian bytes", raw, err)
			}
			if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 0x0102 {
				t.Fatalf("GetUint64 = %d, %v", v, err)
			}
		}},
		{"uint64_of_wrong_length_is_corrupt", func(t *testing.T) {
			must(t, s.Set([]byte("odd"), []byte{1, 2, 3}))
			if _, err := s.GetUint64([]byte("odd")); !errors.Is(err, badgerlog.ErrCorrupt) {
				t.Fatalf("GetUint64 of 3 bytes = %v, want ErrCorrupt", err)
			}
		}},
		{"stable_keys_do_not_touch_the_log", func(t *testing.T) {
			requireBounds(t, s, 0, 0)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
	closeStore(t, s)
	s = openBadger(t, dir)
	defer closeStore(t, s)
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 0x0102 {
		t.Fatalf("after reopen GetUint64 = %d, %v", v, err)
	}
}

// TestHasExistingState checks the store against hashicorp/raft's own reading
// of it (which treats only a "not found" error text as absence).
func TestHasExistingState(t *testing.T) {
	for _, store := range backends.LogStores() {
		t.Run(store, func(t *testing.T) { testHasExistingState(t, store) })
	}
}

func testHasExistingState(t *testing.T, store string) {
	s := openTestStore(t, store, t.TempDir())
	defer closeStore(t, s)
	snaps := raft.NewInmemSnapshotStore()
	has, err := raft.HasExistingState(s, s, snaps)
	if err != nil || has {
		t.Fatalf("fresh store: HasExistingState = %v, %v; want false, nil", has, err)
	}
	must(t, s.SetUint64([]byte("CurrentTerm"), 3))
	has, err = raft.HasExistingState(s, s, snaps)
	if err != nil || !has {
		t.Fatalf("after a term: HasExistingState = %v, %v; want true, nil", has, err)
	}
}

// crashDirEnv names the data dir of the child process of TestCrashRecovery.
const crashDirEnv = "TICKETD_HASHICORP_CRASH_DIR"

// crashStoreEnv names the log store of the child process of TestCrashRecovery.
const crashStoreEnv = "TICKETD_HASHICORP_CRASH_STORE"

// TestCrashRecovery kills a process with SIGKILL while it writes the log
// (each log store in turn)
// (compacts it, and truncates and rewrites its suffix), keeping the
// watermark as a node does, then reopens its data dir: the watermark accepts
// the log (a clean kill -9 never makes a node refuse to start, whatever the
// moment, though the watermark is written off the append path), every
// write the child acknowledged is there, nothing it compacted came back, and
// the log has no holes.
func TestCrashRecovery(t *testing.T) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		crashChild(os.Getenv(crashStoreEnv), dir)
		return
	}
	for _, store := range backends.LogStores() {
		t.Run(store, func(t *testing.T) { testCrashRecovery(t, store) })
	}
}

func testCrashRecovery(t *testing.T, store string) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashRecovery$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashStoreEnv+"="+store)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked, compacted, snapshot uint64
	truncating := false
	sc := bufio.NewScanner(out)
	killed := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "acked":
			acked, truncating = v, false
		case "compacted":
			compacted = v
		case "snapshot":
			snapshot = v
		case "truncating":
			truncating = true
		}
		if acked >= 3000 && !killed {
			_ = cmd.Process.Kill() // SIGKILL: no deferred close, no flush
			killed = true
		}
	}
	_ = cmd.Wait()
	if !killed {
		t.Fatalf("child exited before it was killed (acked %d)", acked)
	}

	s := openTestStore(t, store, dir)
	defer closeStore(t, s)
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	wm, mark, err := watermark.Open(dir, storedLog{logs: s, stable: s, snaps: snapshotAt(t, snapshot)}, watermark.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := wm.Close(); err != nil {
		t.Fatal(err)
	}
	if err := watermark.Check(mark, last); err != nil {
		t.Fatalf("a kill -9 left a log the watermark refuses: %v", err)
	}
	if mark.LastIndex == 0 {
		t.Fatal("the child never recorded a watermark")
	}
	t.Logf("after kill -9: log [%d, %d], watermark %d, acknowledged %d (truncating: %v)", first, last, mark.LastIndex, acked, truncating)
	if truncating {
		acked = min(acked, last) // killed inside a suffix rewrite: its entries may be gone
	}
	if last < acked {
		t.Fatalf("last index %d after crash, but %d was acknowledged", last, acked)
	}
	if first <= compacted {
		t.Fatalf("first index %d after crash, but up to %d was compacted", first, compacted)
	}
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil || !sameLog(&l, entry(i)) {
			t.Fatalf("entry %d after crash: %+v, %v", i, l, err)
		}
	}
	if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term < acked {
		t.Fatalf("CurrentTerm %d after crash, %d acknowledged (%v)", term, acked, err)
	}
}

// crashChild writes batches of 1 to 16 entries and a stable value forever,
// compacting every 500 entries, printing what is durable; its parent kills it.
func crashChild(store, dir string) {
	s, err := openStore(backends.Config{DataDir: dir, LogStore: store}, zap.NewNop(), newHCLog(zap.NewNop()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	wm, _, err := watermark.Open(dir, storedLog{logs: s, stable: s, snaps: raft.NewInmemSnapshotStore()}, watermark.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s.hooks().wm = wm
	w := bufio.NewWriter(os.Stdout)
	next := uint64(1)
	for batch := uint64(0); ; batch++ {
		n := batch%16 + 1
		if err := s.StoreLogs(entries(next, next+n-1)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		next += n
		if err := s.SetUint64([]byte("CurrentTerm"), next-1); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Fprintf(w, "acked %d\n", next-1)
		if next > 1000 && batch%40 == 0 {
			to := next - 500
			// A node compacts only after a snapshot up to the same index.
			fmt.Fprintf(w, "snapshot %d\n", to)
			_ = w.Flush()
			if err := s.DeleteRange(0, to); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			fmt.Fprintf(w, "compacted %d\n", to)
		}
		if batch%7 == 3 && next > 8 {
			// A follower dropping a conflicting suffix and taking the
			// leader's entries (here the same ones) in its place.
			fmt.Fprintln(w, "truncating")
			_ = w.Flush()
			if err := s.DeleteRange(next-5, next-1); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			if err := s.StoreLogs(entries(next-5, next-1)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			fmt.Fprintf(w, "acked %d\n", next-1)
		}
		_ = w.Flush()
	}
}

// TestCompactionInChunks deletes a prefix of more than two
// badgerlog.CompactChunk's worth of entries, as raft compacts after a
// snapshot, while another goroutine keeps appending (the chunked deletion
// lets appends in between): the log then starts right after the compacted
// prefix, holds every appended entry, and reopens the same.
func TestCompactionInChunks(t *testing.T) {
	dir := t.TempDir()
	s := openBadger(t, dir)
	const n, to = 3 * badgerlog.CompactChunk, 2*badgerlog.CompactChunk + 7
	if err := s.StoreLogs(entries(1, n)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		next := uint64(n + 1)
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := s.StoreLogs(entries(next, next)); err != nil {
				done <- err
				return
			}
			next++
		}
	}()
	if err := s.DeleteRange(1, to); err != nil {
		t.Fatal(err)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	check := func(s *logStore) {
		t.Helper()
		first, _ := s.FirstIndex()
		last, _ := s.LastIndex()
		if first != to+1 || last < n {
			t.Fatalf("log [%d, %d] after compacting to %d, want [%d, ≥%d]", first, last, to, to+1, n)
		}
		var l raft.Log
		if err := s.GetLog(to, &l); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("GetLog(%d) after compaction: %v, want ErrLogNotFound", to, err)
		}
		for i := first; i <= last; i++ {
			if err := s.GetLog(i, &l); err != nil || !sameLog(&l, entry(i)) {
				t.Fatalf("entry %d: %+v, %v", i, l, err)
			}
		}
	}
	check(s)
	closeStore(t, s)
	s = openBadger(t, dir)
	defer closeStore(t, s)
	check(s)
}

// snapshotAt returns a snapshot store holding an empty snapshot at index
// (none for 0): what a node that compacted its log up to index had taken.
func snapshotAt(t *testing.T, index uint64) raft.SnapshotStore {
	t.Helper()
	snaps := raft.NewInmemSnapshotStore()
	if index == 0 {
		return snaps
	}
	_, trans := raft.NewInmemTransport("")
	defer func() { _ = trans.Close() }()
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, entry(index).Term, raft.Configuration{}, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return snaps
}
