package core_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
)

// ids returns the ids of sessions.
func ids(sessions []core.Session) []uint64 {
	out := make([]uint64, 0, len(sessions))
	for _, s := range sessions {
		out = append(out, s.ID)
	}
	return out
}

// TestSessionRange: pages of open sessions by id, each starting after the
// last id of the one before, cover every open session once, skip ended
// ones, and end with an empty page (also after the largest id).
func TestSessionRange(t *testing.T) {
	sm := core.NewStateMachine()
	applyAll(t, sm,
		core.CreateSession(1000), // 1
		core.CreateSession(1000), // 2
		core.CreateSession(1000), // 3
		core.CloseSession(2),     // 4
		core.CreateSession(1000), // 5
		core.CreateSession(1000), // 6
	)
	require.Equal(t, []uint64{1, 3}, ids(sm.SessionRange(0, 2)))
	require.Equal(t, []uint64{5, 6}, ids(sm.SessionRange(3, 2)))
	require.Empty(t, sm.SessionRange(6, 2))
	require.Equal(t, []uint64{1, 3, 5, 6}, ids(sm.SessionRange(0, 0)))
	require.Equal(t, []uint64{3, 5, 6}, ids(sm.SessionRange(1, 0)))
	require.Empty(t, sm.SessionRange(math.MaxUint64, 0))
}
