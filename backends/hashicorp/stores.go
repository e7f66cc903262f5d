package hashicorp

import (
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/internal/badgerlog"
)

// This file chooses and opens the node's Raft log store (Config.LogStore).

// nodeStore is a node's Raft log store and stable store (term, vote), one
// of backends.LogStores: logStore over badger or walStore over raft-wal.
type nodeStore interface {
	raft.LogStore
	raft.StableStore
	// hooks returns the watermark, fail-stop and timing hooks the store
	// calls (logHooks).
	hooks() *logHooks
	// replayed tells the store that the state machine has applied every
	// entry up to index, or restored a snapshot covering them: what the
	// store keeps in memory for a restart's reads of them may go
	// (walStore's replay cache; the badger store keeps nothing).
	replayed(index uint64)
	// Close closes the store's files; nothing may use it after.
	Close() error
}

// openStore claims cfg.DataDir for cfg.LogStore (backends.ClaimLogStore:
// a data dir written by another store or backend is refused) and opens
// that store. Errors: backends.ErrWrongLogStore, backends.ErrWrongBackend,
// or the store's.
func openStore(cfg backends.Config, logger *zap.Logger, hl hclog.Logger) (nodeStore, error) {
	if err := backends.ClaimLogStore(cfg.DataDir, BackendName, cfg.LogStore); err != nil {
		return nil, fmt.Errorf("hashicorp: %w", err)
	}
	if cfg.LogStore == backends.LogStoreWAL {
		return openWALStore(cfg.DataDir, hl.Named("wal"))
	}
	db, err := badgerlog.Open(cfg.DataDir, BackendName, logger)
	if err != nil {
		return nil, err
	}
	s, err := newLogStore(db)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}
