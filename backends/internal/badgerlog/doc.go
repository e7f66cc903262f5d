// Package badgerlog holds what both consensus backends share about their
// badger/v4 storage: opening a node's database with the options a Raft log
// needs (SyncWrites on), the marker that ties a data dir to one backend, the
// big-endian index-key encoding, and batched durable writes.
//
// It knows nothing of any Raft library: the hashicorp backend builds its
// raft.LogStore/raft.StableStore on it, the etcd backend its raft.Storage.
//
// # Layout
//
// A node's data dir holds the badger database under DBDir(dataDir)
// ("<DataDir>/raft") and snapshot files under SnapshotDir(dataDir)
// ("<DataDir>/snapshots").
//
// # Usage
//
//  1. Open(dataDir, "hashicorp", logger) once per node; it fails with
//     ErrWrongBackend when the data dir was written by another backend.
//  2. Store each log index under IndexKey(prefix, index): big-endian, so that
//     key order is index order and FirstIndex/LastIndex are one seek each.
//  3. Write a batch of entries with Batch: one transaction (one fsync) unless
//     badger's transaction size limit forces a split; every part is durable
//     before Batch returns.
//  4. Delete a compacted prefix of the log with DeleteIndexes, at most
//     CompactChunk indexes per call, oldest first, so that appends never
//     queue behind one huge write and a crash leaves a contiguous log.
//  5. Close the *badger.DB when the node stops.
//
// Example:
//
//	db, err := badgerlog.Open(cfg.DataDir, "hashicorp", cfg.Logger)
//	if err != nil {
//		return err
//	}
//	defer db.Close()
//	err = badgerlog.Batch(db, len(entries), func(txn *badger.Txn, i int) error {
//		return txn.Set(badgerlog.IndexKey(logPrefix, entries[i].Index), encode(entries[i]))
//	})
package badgerlog
