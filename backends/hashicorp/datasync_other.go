//go:build !linux

package hashicorp

import "os"

// dataSyncOS is os.File's Sync outside Linux (fsync, or F_FULLFSYNC on
// macOS), which has no fdatasync.
func dataSyncOS(f *os.File) error { return f.Sync() }
