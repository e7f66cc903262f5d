package badgerlog

import "github.com/dgraph-io/badger/v4"

// CompactChunk is the most log entries one write deletes when a compacted
// prefix of a Raft log is removed. A snapshot's compaction deletes about
// SnapshotThreshold (8192) entries; in one badger write that took 10-30 ms
// during which appends queued behind it and p99 doubled. In
// chunks of this size an append waits for at most one small write. Deleting
// in ascending index order keeps every prefix of the work a log that starts
// at a contiguous index, so a crash in the middle leaves a consistent log.
const CompactChunk = 512

// DeleteIndexes deletes the keys IndexKey(prefix, i) for i in [lo, hi] in
// one durable Batch (split only by badger's transaction limit); missing
// keys are no error. Callers deleting a long range call it once per
// CompactChunk indexes, in ascending order. Errors are Batch's.
func DeleteIndexes(db *badger.DB, prefix []byte, lo, hi uint64) error {
	if lo > hi {
		return nil
	}
	return Batch(db, int(hi-lo+1), func(txn *badger.Txn, i int) error {
		return txn.Delete(IndexKey(prefix, lo+uint64(i)))
	})
}
