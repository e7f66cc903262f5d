package etcd

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/etcd/internal/raftstore"
	"github.com/ticketd/ticketd/backends/etcd/internal/walstore"
	"github.com/ticketd/ticketd/backends/internal/badgerlog"
	"github.com/ticketd/ticketd/backends/internal/watermark"
)

// raftStorage is a node's durable Raft state in one of the log stores
// (Config.LogStore): raftstore.Store on badger or walstore.Store on etcd's
// own write-ahead log. raft reads it (raft.Storage); the loop writes it.
type raftStorage interface {
	raft.Storage
	// IsEmpty reports a store with no HardState, entry or snapshot.
	IsEmpty() bool
	// Save makes a Ready's HardState, entries and snapshot durable.
	Save(hs *pb.HardState, ents []*pb.Entry, snap *pb.Snapshot) error
	// CreateSnapshot records a snapshot of the state machine and compacts
	// the log up to compactTo once the snapshot is durable. It runs on the
	// snapshot goroutine while the loop calls Save: writing the snapshot
	// holds no lock Save needs. raft.ErrSnapOutOfDate: a snapshot from the
	// leader was saved meanwhile.
	CreateSnapshot(snap *pb.Snapshot, compactTo uint64) error
	// Peers and SavePeers read and durably replace the address book.
	Peers() []byte
	SavePeers(data []byte) error
	// Close flushes what is kept in memory and closes the store's files.
	Close() error
}

var (
	_ raftStorage = (*raftstore.Store)(nil)
	_ raftStorage = (*walstore.Store)(nil)
)

// openStorage claims cfg.DataDir for cfg.LogStore (backends.ClaimLogStore:
// a data dir written by another store or backend is refused) and opens that
// store; db is the badger database of the badger store (nil for the wal
// store), which the caller closes after the store. A store whose stored
// state does not verify is refused with an error wrapping ErrCorrupt that
// says how to recover. Call it after backends.PrepareDataDir.
func openStorage(cfg backends.Config, logger *zap.Logger) (raftStorage, *badger.DB, error) {
	if err := backends.ClaimLogStore(cfg.DataDir, BackendName, cfg.LogStore); err != nil {
		return nil, nil, fmt.Errorf("etcd: %w", err)
	}
	if cfg.LogStore == backends.LogStoreWAL {
		dir := backends.LogStoreDir(cfg.DataDir, BackendName, backends.LogStoreWAL)
		s, err := walstore.Open(dir, logger.Named("wal"))
		if err != nil {
			// The log cannot be read whole: refuse, as for a damaged badger
			// database (watermark.HoleError: errors.Is ErrLogShortened).
			hole := &watermark.HoleError{DataDir: cfg.DataDir, What: fmt.Sprintf("its write-ahead log cannot be read (%v)", err)}
			return nil, nil, fmt.Errorf("etcd: %w: %w", ErrCorrupt, hole)
		}
		return s, nil, nil
	}
	db, err := badgerlog.Open(cfg.DataDir, BackendName, logger)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd: %w", err)
	}
	s, err := raftstore.Open(db, badgerlog.SnapshotDir(cfg.DataDir))
	if err != nil {
		_ = db.Close()
		if errors.Is(err, ErrCorrupt) {
			return nil, nil, fmt.Errorf("etcd: data dir %s: %w; refusing to start: recover by %s", cfg.DataDir, err, watermark.ReplaceMember)
		}
		return nil, nil, fmt.Errorf("etcd: data dir %s: %w", cfg.DataDir, err)
	}
	return s, db, nil
}
