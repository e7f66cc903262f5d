//go:build !linux

package floor

import "os"

// datasync flushes f to the device; fsync where fdatasync(2) is not available.
func datasync(f *os.File) error { return f.Sync() }
