package server

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
)

// TestGrantTimeoutIsUnavailable: a grant proposal that times out inside the
// server (its client still waiting) is answered Unavailable, outcome unknown,
// never DeadlineExceeded, which says the client's own waiting ran out
// (docs/api.md#errors).
func TestGrantTimeoutIsUnavailable(t *testing.T) {
	h := newHarness(t, t.TempDir())
	h.n.proposeTimeout = 20 * time.Millisecond
	h.mem.HoldProposals(true)
	require.NoError(t, h.acquire("c1", "a", "o1", 1000, false))
	op := h.ops["c1"]
	deadline := time.Now().Add(10 * time.Second) // real time: the proposal timeout is a real timer
	for !op.done {
		require.True(t, time.Now().Before(deadline), "the grant never timed out")
		time.Sleep(5 * time.Millisecond)
		h.collect()
	}
	require.ErrorIs(t, op.res.err, ErrOutcomeUnknown)
	require.NotErrorIs(t, op.res.err, context.DeadlineExceeded)
	require.Equal(t, connect.CodeUnavailable, connect.CodeOf(h.n.toConnect(op.res.err)))
}
