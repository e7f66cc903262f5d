package server

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/lessor"
	"github.com/ticketd/ticketd/server/waitq"
)

func TestCodeOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want connect.Code
	}{
		{"invalid_argument", core.ValidateKey(""), connect.CodeInvalidArgument},
		{"no_member", fmt.Errorf("%w: n9", ErrNoMember), connect.CodeInvalidArgument},
		{"held", fmt.Errorf("%w: k", waitq.ErrHeld), connect.CodeAlreadyExists},
		{"release_not_found", fmt.Errorf("%w: k", ErrNotFound), connect.CodeNotFound},
		{"renew_not_held", fmt.Errorf("%w: k", lessor.ErrNotHeld), connect.CodeNotFound},
		{"renew_expired", fmt.Errorf("%w: k", lessor.ErrExpired), connect.CodeNotFound},
		{"not_leader", &core.NotLeaderError{}, connect.CodeUnavailable},
		{"stopped", core.ErrStopped, connect.CodeUnavailable},
		{"queue_closed", waitq.ErrClosed, connect.CodeUnavailable},
		{"lessor_not_primary", lessor.ErrNotPrimary, connect.CodeUnavailable},
		{"lessor_closed", lessor.ErrClosed, connect.CodeUnavailable},
		{"deadline", fmt.Errorf("wait: %w", context.DeadlineExceeded), connect.CodeDeadlineExceeded},
		{"canceled", context.Canceled, connect.CodeCanceled},
		{"internal_proposal_timeout", fmt.Errorf("%w: grant of %q: %v", ErrOutcomeUnknown, "k", context.DeadlineExceeded), connect.CodeUnavailable},
		{"retry_lock_ending", fmt.Errorf("%w: %q token 1: %w", ErrLockEnding, "k", lessor.ErrExpired), connect.CodeUnavailable},
		{"stale_read_replaying", fmt.Errorf("%w: applied 3", ErrReplaying), connect.CodeUnavailable},
		{"queue_full", waitq.ErrFull, connect.CodeResourceExhausted},
		{"table_full", ErrTooManyLocks, connect.CodeResourceExhausted},
		{"limit_mismatch", &waitq.LimitMismatchError{Key: "k", Limit: 2}, connect.CodeFailedPrecondition},
		{"session_not_found", &SessionNotFoundError{Session: 7}, connect.CodeNotFound},
		{"unknown", errors.New("disk on fire"), connect.CodeInternal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, codeOf(tc.err))
		})
	}
}

func hintOf(t *testing.T, err error) *ticketv1.LeaderHint {
	t.Helper()
	var ce *connect.Error
	require.ErrorAs(t, err, &ce)
	for _, d := range ce.Details() {
		v, derr := d.Value()
		require.NoError(t, derr)
		if h, ok := v.(*ticketv1.LeaderHint); ok {
			return h
		}
	}
	return nil
}

func TestToConnect(t *testing.T) {
	t.Parallel()
	sm := core.NewStateMachine()
	_, err := sm.Apply(1, core.SetMember("n2", "127.0.0.1:7002"))
	require.NoError(t, err)
	n := &Node{cfg: config.Config{ID: "n1"}, sm: sm}

	assert.NoError(t, n.toConnect(nil))

	t.Run("hint_from_not_leader_error", func(t *testing.T) {
		err := n.toConnect(&core.NotLeaderError{Leader: core.Member{ID: "n2", RaftAddr: "127.0.0.1:7102"}})
		assert.Equal(t, connect.CodeUnavailable, connect.CodeOf(err))
		h := hintOf(t, err)
		require.NotNil(t, h)
		assert.Equal(t, "n2", h.GetLeaderId())
		assert.Equal(t, "127.0.0.1:7002", h.GetLeaderAddr(), "the API address comes from the member directory")
	})
	t.Run("no_hint_naming_self", func(t *testing.T) {
		err := n.toConnect(&core.NotLeaderError{Leader: core.Member{ID: "n1"}})
		assert.Nil(t, hintOf(t, err))
	})
	t.Run("no_hint_on_other_codes", func(t *testing.T) {
		err := n.toConnect(fmt.Errorf("%w: k", waitq.ErrHeld))
		assert.Equal(t, connect.CodeAlreadyExists, connect.CodeOf(err))
		assert.Nil(t, hintOf(t, err))
	})
	t.Run("connect_errors_pass_through", func(t *testing.T) {
		in := connect.NewError(connect.CodeAlreadyExists, errors.New("from the leader"))
		assert.Same(t, in, n.toConnect(in))
	})
}
