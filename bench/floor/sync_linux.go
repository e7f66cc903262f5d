package floor

import (
	"os"
	"syscall"
)

// datasync flushes f's data (and the size change of an append) to the device:
// fdatasync(2), what Raft log stores use for an append.
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
