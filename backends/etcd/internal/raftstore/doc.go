// Package raftstore is the etcd backend's durable Raft state on badger/v4: a
// raft.Storage (go.etcd.io/raft/v3) whose log entries and HardState live in
// one badger database and whose latest snapshot is a file beside it (named
// by a badger record), plus the one write the Ready loop
// needs, Save(hardState, entries, snapshot), committed as a single synced
// batch (dgraph raftwal's DiskStorage.Save).
//
// Every record is stored as a 4-byte big-endian CRC-32C of its body followed
// by the body (a protobuf raftpb message), and Open reads and verifies the
// whole state before the node starts: a flipped byte, a cut record, a gap in
// the log or an inconsistent HardState is reported as an error wrapping
// ErrCorrupt, never as a panic inside raft and never silently rewritten.
//
// The log is also kept in memory (like raft.MemoryStorage, which etcd itself
// pairs with its WAL), so Entries and Term never touch the disk; its length is
// bounded by the log a snapshot waits for (backends.SnapshotDue: at least
// the snapshot threshold, and about as many bytes as the snapshot) plus the
// trailing entries kept after compaction.
//
// # Key layout
//
//	etcd/entry/<8-byte big-endian index>  CRC + raftpb.Entry
//	etcd/hardstate                         CRC + raftpb.HardState
//	etcd/snapshot                          CRC + compaction point (index, term: 16 bytes) + raftpb.Snapshot without Data
//	etcd/peers                             CRC + the backend's address book (opaque here)
//
// and, under the snapshot directory Open is given (<data-dir>/snapshots),
// one file <term>-<index>.snap per snapshot: CRC + the whole raftpb.Snapshot.
// The record's index and term name the file; a record whose snapshot
// carries Data is an older version's, which kept the snapshot inside
// badger, and is read as it is until the next snapshot replaces it. The
// snapshot is not a badger value because badger keeps values above 1 MiB
// in its value log and never reclaims a superseded one by itself: a table
// of a million locks grew the data dir by one ~37 MB snapshot per snapshot.
// A file is written and synced before the record naming it, and deleted
// once a newer record is durable, so the data dir holds one snapshot (two
// while the next is written).
//
// The compaction point (the last entry dropped from the log, raft's "dummy
// entry") is stored with the snapshot because the two always change together.
// Entries at or below it are garbage: CreateSnapshot moves the point first
// and deletes them afterwards in the background, badgerlog.CompactChunk per
// write (so no append waits behind thousands of deletions); whatever a crash
// or Close leaves of them is deleted at Open.
//
// # Usage
//
//  1. Open(db, snapDir) on a database from badgerlog.Open and the snapshot
//     directory badgerlog.SnapshotDir; it fails with ErrCorrupt when the
//     stored state does not verify or the snapshot file is missing.
//  2. Hand the Store to raft.Config.Storage. On a brand-new store (IsEmpty),
//     bootstrap by saving an initial HardState and snapshot with Save.
//  3. For every raft.Ready, call Save(rd.HardState, rd.Entries, rd.Snapshot)
//     before sending the messages that depend on it (etcd raft doc.go, step 1).
//  4. After applying entries, CreateSnapshot(snap, compactTo) to record a
//     snapshot of the state machine and drop the log up to compactTo; it
//     may run on its own goroutine while Save goes on.
//  5. Close flushes the latest commit index; the caller then closes the db.
//
// Example:
//
//	st, err := raftstore.Open(db, badgerlog.SnapshotDir(dataDir))
//	if err != nil {
//		return err // errors.Is(err, raftstore.ErrCorrupt) for bad data on disk
//	}
//	rn, err := raft.NewRawNode(&raft.Config{ID: id, Storage: st, ...})
//	...
//	rd := rn.Ready()
//	if err := st.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
//		return err
//	}
package raftstore
