package core_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/ticketd/ticketd/core"
)

// liveHeap is the bytes of live heap objects after two full collections.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// fillTable applies n plain exclusive Grants of keys of 8 bytes and one
// shared owner string, so that what a lock costs is the table's own
// layout, and returns the live heap per lock it added.
func fillTable(n int) (*core.StateMachine, float64) {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%07d", i)
	}
	before := liveHeap()
	sm := core.NewStateMachine()
	for i, k := range keys {
		if _, err := sm.Apply(uint64(i+1), core.Grant(k, 60_000, "owner")); err != nil {
			panic(err)
		}
	}
	perLock := float64(int64(liveHeap())-int64(before)) / float64(n)
	return sm, perLock
}

// maxTableBytesPerLock bounds the lock table's heap per plain exclusive
// lock, its key's bytes not counted (they are the caller's): the B-tree's
// slot of a 64-byte holder, about twice over since ascending inserts leave
// its nodes half full (docs/benchmarks.md#scale-a-million-locks). A
// 96-byte Lock per slot, the layout before, costs about 185; this one
// about 120.
const maxTableBytesPerLock = 150

// TestLockTableBytesPerLock: a table of 200k plain exclusive locks holds
// at most maxTableBytesPerLock bytes of heap per lock.
func TestLockTableBytesPerLock(t *testing.T) {
	sm, perLock := fillTable(200_000)
	t.Logf("%.1f bytes per lock", perLock)
	if perLock > maxTableBytesPerLock {
		t.Fatalf("the lock table holds %.1f bytes per lock, more than %d: has the holder layout grown?", perLock, maxTableBytesPerLock)
	}
	runtime.KeepAlive(sm)
}

// BenchmarkLockTableMemory reports the lock table's heap per plain
// exclusive lock at 1M locks (bytes/lock), as TestLockTableBytesPerLock
// bounds it at 200k.
func BenchmarkLockTableMemory(b *testing.B) {
	for b.Loop() {
		sm, perLock := fillTable(1_000_000)
		b.ReportMetric(perLock, "bytes/lock")
		runtime.KeepAlive(sm)
	}
}
