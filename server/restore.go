package server

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/etcd"
	"github.com/ticketd/ticketd/backends/hashicorp"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/applytime"
	"github.com/ticketd/ticketd/server/config"
)

// Restore creates, in cfg.DataDir (which must hold no Raft state), the data
// of member cfg.ID of a new cluster whose voters are cfg.Members(), from
// data, the verified core snapshot bytes of a snapshot file (snapfile.Read)
// described by h. Run it for every member from the same file (etcdutl
// snapshot restore); then start each with `ticketd serve`. The Raft log is
// written in cfg.Raft.LogStore, so a snapshot and a restore also move a
// cluster from one log store to the other. The token
// counter continues from h.LastToken: no token is ever issued twice. The
// snapshot may come from a cluster of either backend.
//
// Errors: config.ErrInvalid for an unknown backend, backends.ErrDataDirInUse,
// backends.ErrInvalidConfig, core.ErrDecode, or the storage's.
func Restore(cfg config.Config, h *ticketv1.SnapshotHeader, data []byte, logger *zap.Logger) error {
	var restore backends.RestoreFunc
	switch cfg.Backend {
	case config.BackendHashicorp:
		restore = hashicorp.Restore
	case config.BackendEtcd:
		restore = etcd.Restore
	default:
		return fmt.Errorf("%w: unknown backend %q", config.ErrInvalid, cfg.Backend)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	bcfg := backends.Config{
		ID:        cfg.ID,
		RaftAddr:  cfg.RaftAddr,
		DataDir:   cfg.DataDir,
		LogStore:  cfg.Raft.LogStore,
		Bootstrap: cfg.Members(),
		Logger:    logger,
	}
	if err := restore(bcfg, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("restore %s from snapshot at index %d: %w", cfg.DataDir, h.GetIndex(), err)
	}
	// An apply-time record left in the dir names another log's indexes: the
	// restored node must not measure its leases from it (docs/design.md#leases).
	if err := os.Remove(filepath.Join(cfg.DataDir, applytime.FileName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("restore %s: remove the old apply-time record: %w", cfg.DataDir, err)
	}
	return nil
}
