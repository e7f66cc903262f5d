package core_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
)

// TestSessionLockLen: the holders under a session (what the server counts
// against limits.max_locks_per_session) follow grants under it, a retried
// grant that adds nothing, a release and an expiry of one of its locks, and
// its end; another session's locks and locks under none never count; the
// count is the same after a snapshot and Restore.
func TestSessionLockLen(t *testing.T) {
	sm := core.NewStateMachine()
	res := applyAll(t, sm,
		core.CreateSession(1000),                                         // 1
		core.CreateSession(1000),                                         // 2
		core.Grant("a", 0, "o").WithSession(1),                           // 3: token 1
		core.Grant("b", 0, "o").WithSession(1),                           // 4: token 2
		core.Grant("b", 0, "o").WithSession(1),                           // 5: retry, same holder
		core.Grant("c", 0, "p").WithSession(1).WithMode(core.ModeShared), // 6: token 3
		core.Grant("c", 0, "q").WithSession(1).WithMode(core.ModeShared), // 7: token 4
		core.Grant("d", 0, "o").WithSession(2),                           // 8: token 5
		core.Grant("e", 1000, "o"),                                       // 9: token 6, no session
	)
	require.Equal(t, uint64(2), res[4].Token, "the retry returned its holder")
	require.Equal(t, 4, sm.SessionLockLen(1))
	require.Equal(t, 1, sm.SessionLockLen(2))
	require.Zero(t, sm.SessionLockLen(0), "locks under no session are no session's")
	require.Zero(t, sm.SessionLockLen(99))

	applyAll(t, sm,
		core.Release("a", 1), // 10
		core.Expire("c", 3),  // 11
		core.Release("a", 1), // 12: already gone
	)
	require.Equal(t, 2, sm.SessionLockLen(1))

	fresh := core.NewStateMachine()
	require.NoError(t, fresh.Restore(bytes.NewReader(snapshotBytes(t, sm))))
	require.Equal(t, 2, fresh.SessionLockLen(1), "rebuilt on Restore")
	require.Equal(t, 1, fresh.SessionLockLen(2))

	applyAll(t, sm, core.CloseSession(1))
	require.Zero(t, sm.SessionLockLen(1))
	require.Equal(t, 1, sm.SessionLockLen(2))
}
