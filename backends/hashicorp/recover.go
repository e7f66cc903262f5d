package hashicorp

import (
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/internal/watermark"
	"github.com/ticketd/ticketd/core"
)

// This file is disaster recovery (docs/design.md#storage-and-recovery):
// Restore, a new cluster's data from a core snapshot, and forceNewCluster,
// a survivor of quorum loss rewritten as a one-member cluster.

// restoreTerm is the term of a restored cluster's initial snapshot: a new
// cluster starts its terms again; the token counter, not the term, is what
// must keep growing.
const restoreTerm = 1

// keyCurrentTerm is hashicorp/raft's StableStore key of the current term
// (raft.go, unexported there); Restore sets it to restoreTerm, as
// BootstrapCluster does for a new cluster.
var keyCurrentTerm = []byte("CurrentTerm")

var _ backends.RestoreFunc = Restore

// Restore creates in cfg.DataDir, which must hold no Raft state, the data of
// one member of a new cluster: a snapshot (FileSnapshotStore) of the lock
// table read from snapshot, at index backends.LoadRestore's Index and term 1,
// whose configuration lists cfg.Bootstrap as voters; the log, empty, is in
// cfg.LogStore (so a snapshot and a Restore move a member between stores). New
// then starts from it like from any snapshot. Run it for every member with
// the same snapshot and the same Bootstrap (etcdutl snapshot restore;
// hashicorp's own BootstrapCluster writes the configuration as log entry 1
// instead, which would sit below the restored index).
//
// Errors: backends.ErrInvalidConfig (no Bootstrap, or Validate's),
// backends.ErrDataDirInUse, core.ErrDecode for a damaged snapshot, or the
// storage's. Not safe to run concurrently with a node on the same dir.
func Restore(cfg backends.Config, snapshot io.Reader) error {
	cfg, err := backends.ValidateRestore(cfg)
	if err != nil {
		return err
	}
	st, err := backends.LoadRestore(snapshot)
	if err != nil {
		return err
	}
	if err := backends.PrepareDataDir(cfg.DataDir); err != nil {
		return err
	}
	store, err := openStore(cfg, cfg.Logger, newHCLog(cfg.Logger.Named("restore")))
	if err != nil {
		return err
	}
	var errs []error
	if err := store.SetUint64(keyCurrentTerm, restoreTerm); err != nil {
		errs = append(errs, fmt.Errorf("hashicorp: restore: %w", err))
	}
	if len(errs) == 0 {
		errs = append(errs, writeRestoreSnapshot(cfg, st))
	}
	if err := errors.Join(errs...); err == nil {
		// New refuses Raft state without a watermark beside it.
		errs = append(errs, watermark.Create(cfg.DataDir, watermark.Mark{LastIndex: st.Index}))
	}
	if err := store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("hashicorp: restore: close %s log store: %w", cfg.LogStore, err))
	}
	errs = append(errs, backends.RestrictTree(cfg.DataDir))
	return errors.Join(errs...)
}

// writeRestoreSnapshot writes st as the snapshot of a new cluster of
// cfg.Bootstrap.
func writeRestoreSnapshot(cfg backends.Config, st backends.RestoredState) error {
	hl := newHCLog(cfg.Logger.Named("restore"))
	snaps, err := newSnapshotStore(cfg.DataDir, snapshotRetain, hl)
	if err != nil {
		return fmt.Errorf("hashicorp: restore: snapshot store: %w", err)
	}
	var conf raft.Configuration
	for _, m := range cfg.Bootstrap {
		conf.Servers = append(conf.Servers, raft.Server{
			Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.RaftAddr),
		})
	}
	// The snapshot store writes no legacy peer list, so needs no transport
	// (snapshotStore.Create).
	sink, err := snaps.Create(raft.SnapshotVersionMax, st.Index, restoreTerm, conf, st.Index, nil)
	if err != nil {
		return fmt.Errorf("hashicorp: restore: create snapshot: %w", err)
	}
	if _, err := sink.Write(st.Snapshot); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("hashicorp: restore: write snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("hashicorp: restore: write snapshot: %w", err)
	}
	return nil
}

// forceNewCluster rewrites the node's existing state into that of a new
// cluster with this node as its only voter (Config.ForceNewCluster), with
// hashicorp's RecoverCluster (the library's peers.json recovery): it
// restores the latest snapshot into a scratch state machine, applies every
// entry in the log, writes a snapshot at the last index whose configuration
// is this node alone, and deletes the log. New then restores that snapshot
// into the real state machine. Errors: backends.ErrNoState when there is no
// state, core.ErrDecode for an undecodable entry, or the library's.
func forceNewCluster(cfg backends.Config, rc *raft.Config, logs raft.LogStore, stable raft.StableStore,
	snaps raft.SnapshotStore, trans raft.Transport) error {
	has, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return fmt.Errorf("hashicorp: check existing state: %w", err)
	}
	if !has {
		return fmt.Errorf("%w: %s", backends.ErrNoState, cfg.DataDir)
	}
	conf := raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: raft.ServerID(cfg.ID), Address: raft.ServerAddress(cfg.RaftAddr),
	}}}
	f := &recoverFSM{sm: core.NewStateMachine()}
	if err := raft.RecoverCluster(rc, f, logs, stable, snaps, trans, conf); err != nil {
		return fmt.Errorf("hashicorp: force new cluster: %w", err)
	}
	if f.err != nil {
		return fmt.Errorf("hashicorp: force new cluster: %w", f.err)
	}
	cfg.Logger.Warn("forced a new one-member cluster from this node's data",
		zap.String("node", cfg.ID), zap.Uint64("applied", f.sm.AppliedIndex()), zap.Uint64("last_token", f.sm.LastToken()))
	return nil
}

// recoverFSM is the scratch raft.FSM RecoverCluster replays the log into:
// no hooks, no node. The first apply error is kept and reported after.
type recoverFSM struct {
	sm  *core.StateMachine
	err error
}

func (f *recoverFSM) Apply(l *raft.Log) any {
	if f.err != nil {
		return nil
	}
	if _, _, err := f.sm.ApplyEntry(l.Index, l.Data); err != nil {
		f.err = err
	}
	return nil
}

func (f *recoverFSM) Snapshot() (raft.FSMSnapshot, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &fsmSnapshot{snap: f.sm.Snapshot()}, nil
}

func (f *recoverFSM) Restore(rc io.ReadCloser) error {
	defer func() { _ = rc.Close() }()
	return f.sm.Restore(rc)
}
