package etcd

import (
	"fmt"

	"github.com/ticketd/ticketd/backends"
)

// claimLogStore checks that this backend can keep its log in cfg.LogStore
// and claims cfg.DataDir for it (backends.ClaimLogStore: a data dir
// written by another store or backend is refused). The etcd backend keeps
// its log in badger only (internal/raftstore); LogStoreWAL is refused with
// backends.ErrInvalidConfig before the data dir is claimed. Call it after
// backends.PrepareDataDir.
func claimLogStore(cfg backends.Config) error {
	if cfg.LogStore != backends.LogStoreBadger {
		return fmt.Errorf("%w: the etcd backend keeps its raft log in %s only; log store %q is not available for it",
			backends.ErrInvalidConfig, backends.LogStoreBadger, cfg.LogStore)
	}
	if err := backends.ClaimLogStore(cfg.DataDir, BackendName, cfg.LogStore); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	return nil
}
