package applytime

import (
	"os"
	"testing"
)

// NoFallocate makes Open allocate the record as on a file system without
// fallocate(2) (by writing it) until t ends. Tests using it must not run in
// parallel.
func NoFallocate(t testing.TB) {
	was := fallocate
	fallocate = func(*os.File, int64, int64) error { return errNoFallocate }
	t.Cleanup(func() { fallocate = was })
}
