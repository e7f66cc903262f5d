package core_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
)

// principalCounts reads PrincipalSessions for each of names.
func principalCounts(sm *core.StateMachine, names ...string) map[string]int {
	out := map[string]int{}
	for _, p := range names {
		out[p] = sm.PrincipalSessions(p)
	}
	return out
}

// TestPrincipalSessions: the open sessions per principal (the per-principal
// cap's count) follow every create and end, not an ExpireSession that a
// KeepAlive made late, and come back the same from a snapshot, replacing
// what the restoring state machine counted before.
func TestPrincipalSessions(t *testing.T) {
	names := []string{"alice", "bob", ""}
	sm := core.NewStateMachine()
	applyAll(t, sm,
		core.CreateSession(1000).WithPrincipal("alice"), // 1
		core.CreateSession(1000).WithPrincipal("alice"), // 2
		core.CreateSession(1000).WithPrincipal("alice"), // 3
		core.CreateSession(1000).WithPrincipal("bob"),   // 4
		core.CreateSession(1000),                        // 5: authorization off
		core.Grant("k", 1000, "o").WithSession(2).WithPrincipal("alice"),
	)
	require.Equal(t, map[string]int{"alice": 3, "bob": 1, "": 1}, principalCounts(sm, names...))

	applyAll(t, sm,
		core.CloseSession(2),      // ends, with its lock
		core.KeepAliveSession(4),  // index 8
		core.ExpireSession(4, 4),  // kept alive since: does not end
		core.ExpireSession(5, 0),  // ends
		core.CloseSession(2),      // already ended: changes nothing
		core.ExpireSession(99, 0), // unknown: changes nothing
	)
	require.Equal(t, map[string]int{"alice": 2, "bob": 1, "": 0}, principalCounts(sm, names...))

	snap := snapshotBytes(t, sm)
	fresh := core.NewStateMachine()
	require.NoError(t, fresh.Restore(bytes.NewReader(snap)))
	require.Equal(t, principalCounts(sm, names...), principalCounts(fresh, names...), "rebuilt on Restore")

	// A state machine with sessions of its own forgets them on Restore.
	other := core.NewStateMachine()
	applyAll(t, other,
		core.CreateSession(1000).WithPrincipal("bob"),
		core.CreateSession(1000).WithPrincipal("carol"),
	)
	require.NoError(t, other.Restore(bytes.NewReader(snap)))
	require.Equal(t, map[string]int{"alice": 2, "bob": 1, "": 0, "carol": 0},
		principalCounts(other, append(names, "carol")...), "replaced, not merged")

	// The count goes on from the restored state, and never into a snapshot:
	// the restored and the original write the same bytes after the same
	// entries.
	cmds := []core.Command{core.CreateSession(1000).WithPrincipal("bob"), core.CloseSession(1)}
	applyAll(t, sm, cmds...)
	applyAll(t, other, cmds...)
	require.Equal(t, map[string]int{"alice": 1, "bob": 2, "": 0}, principalCounts(other, names...))
	require.Equal(t, snapshotBytes(t, sm), snapshotBytes(t, other))

	// A version 2 snapshot has no sessions.
	v2, err := os.ReadFile(v2Fixture)
	require.NoError(t, err)
	require.NoError(t, other.Restore(bytes.NewReader(v2)))
	require.Equal(t, map[string]int{"alice": 0, "bob": 0, "": 0}, principalCounts(other, names...))
}
