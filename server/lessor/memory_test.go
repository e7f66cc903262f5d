package lessor_test

import (
	"fmt"
	"runtime"
	"testing"
)

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
// item, its slot in the lease map (a 24-byte leaseID and a pointer, in a
// map that runs between half and seven eighths full) and its slot in the
// deadline heap (docs/benchmarks.md#scale-a-million-locks). The layout
// before (time.Time deadlines, a 32-byte leaseID: a 112-byte item) costs
// about 170; this one about 110.
const maxTrackBytesPerLock = 135

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
