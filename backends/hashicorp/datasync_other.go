//go:build !linux

package hashicorp

import "os"

// dataSyncFile is a raft-wal segment file; outside Linux its Sync is
// os.File's (fsync, or F_FULLFSYNC on macOS).
type dataSyncFile struct{ *os.File }
