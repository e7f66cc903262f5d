package backends

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDiskUsageCountsAllocatedBlocks: a written file counts its bytes on
// both sides; a truncated-up (preallocated, unwritten) file counts its
// length as apparent size but almost nothing as allocated.
func TestDiskUsageCountsAllocatedBlocks(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "f"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	alloc, apparent, err := DiskUsage(dir)
	if err != nil || alloc < 1<<20 || apparent != 1<<20 {
		t.Fatalf("one 1 MiB file: allocated %d, apparent %d, %v", alloc, apparent, err)
	}
	sparse, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sparse.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	sparse.Close()
	alloc2, apparent2, err := DiskUsage(dir)
	if err != nil || alloc2 >= alloc+(1<<20) || apparent2 != 65<<20 {
		t.Fatalf("with a 64 MiB sparse file: allocated %d (was %d), apparent %d, %v", alloc2, alloc, apparent2, err)
	}
}
