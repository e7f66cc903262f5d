package hashicorp

import (
	"os"
	"syscall"
)

// This file is the data sync on Linux.

// dataSyncOS is fdatasync(2) (see dataSyncFile).
func dataSyncOS(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
