package backends

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ticketd/ticketd/core"
)

// RestoreFunc is a backend's Restore: it creates, in cfg.DataDir (which must
// hold no Raft state), the data of one member of a new cluster whose voters
// are cfg.Bootstrap and whose lock table is the core snapshot read from
// snapshot (the bytes of core.Snapshot.WriteTo). Every member of the new
// cluster is restored from the same snapshot (etcdutl snapshot restore).
type RestoreFunc func(cfg Config, snapshot io.Reader) error

// RestoredState is the state a restored cluster starts from (see
// LoadRestore).
type RestoredState struct {
	// Snapshot is the core snapshot the new cluster starts from: the lock
	// table and token counter of the snapshot read, with its applied index
	// moved to Index (core.RebaseSnapshot), in the bytes core writes.
	Snapshot []byte
	// Index is the Raft index of the new cluster's initial snapshot: one past
	// the snapshot's applied index, so that every entry of the new cluster
	// has an index the state machine has not applied yet (core ignores an
	// index at or below AppliedIndex) and no index of the old cluster is
	// reused.
	Index uint64
	// LastToken is the snapshot's last fencing token.
	LastToken uint64
}

// LoadRestore reads and verifies a core snapshot (core.CheckSnapshot: its
// version, checksum and every record, as a restore checks them) and returns
// the state a restored cluster starts from, without building the lock
// table (core.RebaseSnapshot). The token counter carries over: the next
// grant gets a token above every token the snapshot's cluster had issued up
// to the snapshot. Errors: core.ErrDecode (wrapped) for a damaged or
// unknown snapshot, or r's.
func LoadRestore(r io.Reader) (RestoredState, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return RestoredState{}, fmt.Errorf("backends: restore: read snapshot: %w", err)
	}
	info, err := core.CheckSnapshot(data)
	if err != nil {
		return RestoredState{}, fmt.Errorf("backends: restore: read snapshot: %w", err)
	}
	idx := info.AppliedIndex + 1
	snap, err := core.RebaseSnapshot(data, idx)
	if err != nil {
		return RestoredState{}, fmt.Errorf("backends: restore: read snapshot: %w", err)
	}
	return RestoredState{Snapshot: snap, Index: idx, LastToken: info.LastToken}, nil
}

// CheckRestoreTarget returns an error wrapping ErrDataDirInUse when dir
// already holds a node's Raft log (of any store) or snapshots, and nil for a missing or
// empty dir (or one holding only unrelated files).
func CheckRestoreTarget(dir string) error {
	subs := []string{"snapshots"}
	for _, l := range storeLayouts {
		subs = append(subs, l.dir)
	}
	for _, sub := range subs {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("backends: restore into %s: %w", dir, err)
		}
		if len(entries) > 0 {
			return fmt.Errorf("%w: %s (move it away, or choose another --data-dir)", ErrDataDirInUse, dir)
		}
	}
	return nil
}

// ValidateRestore checks a Restore's Config: Validate (with a throwaway
// state machine when none is set) plus a non-empty Bootstrap. It returns
// the Config with defaults filled in.
func ValidateRestore(cfg Config) (Config, error) {
	cfg = cfg.WithDefaults()
	if cfg.StateMachine == nil {
		cfg.StateMachine = core.NewStateMachine()
	}
	if len(cfg.Bootstrap) == 0 {
		return cfg, fmt.Errorf("%w: restore needs the new cluster's members (Bootstrap)", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, CheckRestoreTarget(cfg.DataDir)
}
