package hashicorp

import (
	"fmt"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/internal/badgerlog"
)

// This file is the snapshot store: hashicorp's FileSnapshotStore, its files
// kept at the data dir's modes.

// newSnapshotStore returns hashicorp's FileSnapshotStore under
// <dataDir>/snapshots, keeping retain snapshots, wrapped so that every
// completed snapshot is durable, names included, and leaves the data dir at
// backends.DataDirMode and backends.DataFileMode: FileSnapshotStore creates
// its directories 0755 and its files with os.Create (0666 less the umask).
func newSnapshotStore(dataDir string, retain int, logger hclog.Logger) (raft.SnapshotStore, error) {
	fs, err := raft.NewFileSnapshotStoreWithLogger(dataDir, retain, logger)
	if err != nil {
		return nil, err
	}
	if err := backends.RestrictTree(dataDir); err != nil {
		return nil, err
	}
	return &restrictedSnapshots{SnapshotStore: fs, dataDir: dataDir}, nil
}

// restrictedSnapshots is a raft.SnapshotStore whose sinks fix file modes
// under the data dir when they close (the new snapshot, and badger files
// created since the last fix).
type restrictedSnapshots struct {
	raft.SnapshotStore
	dataDir string
}

func (s *restrictedSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	return &restrictedSink{SnapshotSink: sink, dataDir: s.dataDir}, nil
}

// restrictedSink makes a completed snapshot durable (its directory synced)
// and restricts modes under the data dir.
type restrictedSink struct {
	raft.SnapshotSink
	dataDir string
}

func (s *restrictedSink) Close() error {
	if err := s.SnapshotSink.Close(); err != nil {
		return err
	}
	// FileSnapshotStore fsyncs state.bin and meta.json, renames the
	// snapshot's directory into place and fsyncs snapshots/, but never
	// fsyncs the snapshot's own directory, so the names of its two files
	// are not yet durable (fsync(2)): a power cut could leave an empty
	// directory, which raft skips, after raft compacted the log entries
	// the snapshot stands for. Raft compacts only after Close returns.
	if err := backends.SyncDir(filepath.Join(badgerlog.SnapshotDir(s.dataDir), s.ID())); err != nil {
		return fmt.Errorf("hashicorp: snapshot %s: %w", s.ID(), err)
	}
	if err := backends.RestrictTree(s.dataDir); err != nil {
		return fmt.Errorf("hashicorp: snapshot %s: %w", s.ID(), err)
	}
	return nil
}
