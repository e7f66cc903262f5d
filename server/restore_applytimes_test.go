package server_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/applytime"
	"github.com/ticketd/ticketd/server/config"
)

// TestRestoreRemovesApplyTimes: `ticketd restore` into a dir that still
// holds an apply-time record (its Raft state moved away) removes the record:
// its indexes named the old log, and the restored node must not measure its
// leases from them (docs/design.md#leases).
func TestRestoreRemovesApplyTimes(t *testing.T) {
	t.Parallel()
	h, data := lockSnapshot(t, 3)
	cfg := config.DefaultConfig()
	cfg.ID, cfg.APIAddr, cfg.RaftAddr = "n1", "127.0.0.1:1", "127.0.0.1:2"
	cfg.DataDir = t.TempDir()
	record := filepath.Join(cfg.DataDir, applytime.FileName)
	require.NoError(t, os.WriteFile(record, []byte("a record of another log"), 0o600))
	require.NoError(t, server.Restore(cfg, h, data, nil))
	require.NoFileExists(t, record)
}
