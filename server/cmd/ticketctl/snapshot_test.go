package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// TestSnapshotSaveStatus saves a snapshot of a real one-node cluster with
// `ticketctl snapshot save`, reads it back with `snapshot status` (text and
// JSON), and checks that a damaged file is refused.
func TestSnapshotSaveStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a ticketd node")
	}
	cl := ticketdtest.Start(t, ticketdtest.Options{Nodes: 1})
	ep := cl.Node(0).APIAddr
	code, out, errs := ctl(t, ep, "lock", "acquire", "snap/a", "--ttl", "60s")
	require.Equal(t, exitOK, code, "%s %s", out, errs)

	file := filepath.Join(t.TempDir(), "backup.snap")
	var saved snapshotJSON
	ctlJSON(t, ep, exitOK, &saved, "snapshot", "save", file)
	require.Equal(t, "hashicorp", saved.Backend)
	require.Equal(t, int64(1), saved.LocksHeld)
	require.Equal(t, uint64(1), saved.LastToken)
	require.True(t, saved.Verified)

	var st snapshotJSON
	ctlJSON(t, "127.0.0.1:1", exitOK, &st, "snapshot", "status", file) // offline: no endpoint needed
	require.Equal(t, saved, st)
	code, out, _ = ctl(t, "127.0.0.1:1", "snapshot", "status", file)
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "last token:  1")

	b, err := os.ReadFile(file)
	require.NoError(t, err)
	b[len(b)-3] ^= 0xff
	require.NoError(t, os.WriteFile(file, b, 0o600))
	code, _, errs = ctl(t, "127.0.0.1:1", "snapshot", "status", file)
	require.Equal(t, exitError, code)
	require.Contains(t, errs, "does not match its checksum")

	code, _, _ = ctl(t, ep, "snapshot", "save")
	require.Equal(t, exitUsage, code, "save without FILE")
}
