//go:build !linux

package hashicorp

import "os"

// This file is the data sync outside Linux.

// dataSyncOS is os.File's Sync outside Linux (fsync, or F_FULLFSYNC on
// macOS), which has no fdatasync.
func dataSyncOS(f *os.File) error { return f.Sync() }
