package backends

import (
	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// BadgerOptions returns the badger/v4 options both backends open their Raft
// log database in dir with, so that tools outside this module (ticketbench's
// storage floor) measure the same engine settings without copying them:
//
//   - SyncWrites on: a commit returns only after its WAL is synced, so an
//     acknowledged entry survives kill -9 and power loss
//     (docs/design.md#storage-and-recovery; badger's default is off). Measured
//     with strace: badger v4.9.6 then msyncs twice per commit, first the value
//     log, even when the commit put nothing there (valueLog.write's deferred
//     Sync; log entries are far below ValueThreshold, so it never does), then
//     the memtable write-ahead log. On ext4 the empty sync still costs a
//     device cache flush, about a third of an append. No option avoids it:
//     SyncWrites off plus DB.Sync syncs both files too.
//   - DetectConflicts off: each backend has a single writer per key range, so
//     conflict tracking would only cost memory and time.
//   - One version per key, no compression, no block or index cache: log
//     entries are small, written once and read back mostly from the backends'
//     in-memory caches; this keeps a node small (several run in one test
//     process) and the write path cheap.
//   - 16 MiB memtables and 64 MiB value log files (badger's defaults are
//     64 MiB and 1 GiB): a log is compacted continually, so big files only
//     delay reclaiming space.
//   - Two compactors, badger's metrics off, and no logger (badger logs to
//     stderr by default); set one with WithLogger.
//
// It only builds the options; it opens nothing and is safe to call from any
// goroutine.
func BadgerOptions(dir string) badger.Options {
	return badger.DefaultOptions(dir).
		WithSyncWrites(true).
		WithDetectConflicts(false).
		WithNumVersionsToKeep(1).
		WithCompression(options.None).
		WithBlockCacheSize(0).
		WithIndexCacheSize(0).
		WithMemTableSize(16 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumCompactors(2).
		WithMetricsEnabled(false).
		WithLogger(nil)
}
