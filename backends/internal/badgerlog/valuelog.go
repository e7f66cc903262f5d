package badgerlog

import (
	"errors"

	"github.com/dgraph-io/badger/v4"
)

// valueLogDiscardRatio is the share of a value-log file that must be
// garbage for ReclaimValueLog to rewrite it: badger's recommended 0.5, a
// lifetime write amplification of 2 for what the value log holds.
const valueLogDiscardRatio = 0.5

// valueLogRounds is the most value-log files one ReclaimValueLog rewrites,
// so that one call costs at most that many files' reads and rewrites
// (64 MiB each, backends.BadgerOptions).
const valueLogRounds = 4

// ReclaimValueLog runs badger's value-log garbage collection
// (DB.RunValueLogGC) until it finds no file worth rewriting, at most
// valueLogRounds files. badger never reclaims a value-log file by itself:
// values above its ValueThreshold (1 MiB), such as the snapshots an older
// etcd backend kept in badger, stay on disk after they are deleted or
// overwritten until a GC rewrites their file, and the data dir grows
// without bound. Log entries are far below the threshold and live in the
// LSM tree, which compaction reclaims; this only costs a look at the
// discard statistics when there is nothing to do. Call it after a log
// compaction, from a goroutine that may wait for the rewrites. Errors are
// badger's, other than "nothing to rewrite" and "a GC is already running".
func ReclaimValueLog(db *badger.DB) error {
	for range valueLogRounds {
		err := db.RunValueLogGC(valueLogDiscardRatio)
		if errors.Is(err, badger.ErrNoRewrite) || errors.Is(err, badger.ErrRejected) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}
