package lessor_test

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"

	"github.com/ticketd/ticketd/core"
)

// lockHeap is BenchmarkNodeMemory's -lockheap flag.
var lockHeap = flag.String("lockheap", "", "BenchmarkNodeMemory: write a heap profile (inuse_space, alloc counts) of its 1M-lock table and lessor to this file")

// liveHeap is the bytes of live heap objects after two full collections.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// maxTrackBytesPerLock bounds the lessor's heap per lock timed on its own
// (Track), its key's bytes not counted (the table's, shared): a 64-byte
// item, its 16-byte slot in the lease map (filed by token: leases.go; the
// map runs between half and seven eighths full) and its slot in the
// deadline heap (docs/benchmarks.md#scale-a-million-locks). The layout
// before (time.Time deadlines, a 112-byte item filed under a 32-byte
// (key, token, session) id) costs about 170; this one about 80.
const maxTrackBytesPerLock = 110

// trackLocks tracks n locks of distinct keys on a fresh lessor and returns
// the live heap per lock it added.
func trackLocks(tb testing.TB, n int) float64 {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%07d", i)
	}
	l := newBenchLessor(tb)
	defer func() { _ = l.Close() }()
	before := liveHeap()
	for i, k := range keys {
		l.Track(k, uint64(i+1), 600_000, uint64(i+1))
	}
	perLock := float64(int64(liveHeap())-int64(before)) / float64(n)
	runtime.KeepAlive(l)
	return perLock
}

// TestTrackBytesPerLock: a lessor timing 200k locks holds at most
// maxTrackBytesPerLock bytes of heap per lock.
func TestTrackBytesPerLock(t *testing.T) {
	perLock := trackLocks(t, 200_000)
	t.Logf("%.1f bytes per lock", perLock)
	if perLock > maxTrackBytesPerLock {
		t.Fatalf("the lessor holds %.1f bytes per tracked lock, more than %d: has the item layout grown?", perLock, maxTrackBytesPerLock)
	}
}

// BenchmarkTrackMemory reports the lessor's heap per tracked lock at 1M
// locks (bytes/lock), as TestTrackBytesPerLock bounds it at 200k.
func BenchmarkTrackMemory(b *testing.B) {
	for b.Loop() {
		b.ReportMetric(trackLocks(b, 1_000_000), "bytes/lock")
	}
}

// BenchmarkNodeMemory reports what a node's heap holds per exclusive lock
// at 1M locks (bytes/lock) in the lock table and the lessor together, the
// locks granted as a node applies them: Grant entries decoded from their
// log encoding (ApplyEntry), with owner ids of the SDK's form and length,
// each then tracked as the server's apply hook does (Track). With
// -lockheap FILE it writes the heap profile at that point, for
// `go tool pprof -sample_index=inuse_space` (docs/benchmarks.md#scale-a-million-locks).
func BenchmarkNodeMemory(b *testing.B) {
	const n = 1_000_000
	entries := make([][]byte, n)
	for i := range entries {
		owner := fmt.Sprintf("ip-10-0-0-1.internal/12345/0123456789abcdef-%d", i+1)
		data, err := core.Encode(core.Grant(fmt.Sprintf("scale/lock/%08d", i), 86_400_000, owner))
		if err != nil {
			b.Fatal(err)
		}
		entries[i] = data
	}
	for b.Loop() {
		before := liveHeap()
		sm := core.NewStateMachine()
		l := newBenchLessor(b)
		for i, data := range entries {
			index := uint64(i + 1)
			cmd, res, err := sm.ApplyEntry(index, data)
			if err != nil {
				b.Fatal(err)
			}
			l.Track(cmd.Key, res.Token, res.LeaseMS, index)
		}
		b.ReportMetric(float64(int64(liveHeap())-int64(before))/n, "bytes/lock")
		if *lockHeap != "" {
			f, err := os.Create(*lockHeap)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.WriteHeapProfile(f); err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
		}
		runtime.KeepAlive(sm)
		_ = l.Close()
	}
	runtime.KeepAlive(entries)
}
