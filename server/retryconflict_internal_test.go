package server

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/waitq"
)

// TestRetryConflict checks the leader's check after apply: a Grant that
// returned the owner's existing holder (Created false) is answered only when
// that holder has the request's mode, limit and session; core's Result of a
// plain exclusive holder carries zero Mode and Limit.
func TestRetryConflict(t *testing.T) {
	t.Parallel()
	excl := acquireRequest{key: "k", owner: "o"}
	shared := acquireRequest{key: "k", owner: "o", mode: core.ModeShared}
	slot := acquireRequest{key: "k", owner: "o", limit: 3}
	inSession := acquireRequest{key: "k", owner: "o", session: 9}
	plainRes := core.Result{Outcome: core.OutcomeGranted, Token: 1}
	sharedRes := core.Result{Outcome: core.OutcomeGranted, Token: 1, Mode: core.ModeShared, Holders: 2}
	slotRes := core.Result{Outcome: core.OutcomeGranted, Token: 1, Limit: 3, Holders: 1}
	sessionRes := core.Result{Outcome: core.OutcomeGranted, Token: 1, Session: 9}
	for _, tc := range []struct {
		name     string
		r        acquireRequest
		res      core.Result
		conflict string // "" when the holder is the request's retry
	}{
		{"exclusive_retry", excl, plainRes, ""},
		{"shared_retry", shared, sharedRes, ""},
		{"slot_retry", slot, slotRes, ""},
		{"session_retry", inSession, sessionRes, ""},
		{"exclusive_got_shared", excl, sharedRes, "as a shared lock"},
		{"shared_got_exclusive", shared, plainRes, "as an exclusive lock"},
		{"exclusive_got_slot", excl, slotRes, "semaphore slot (limit 3)"},
		{"slot_other_limit", acquireRequest{key: "k", owner: "o", limit: 2}, slotRes, "semaphore slot (limit 3)"},
		{"no_session_got_session", excl, sessionRes, "under session 9"},
		{"session_got_none", inSession, plainRes, "(no session)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := retryConflict(tc.r, tc.res)
			if tc.conflict == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, waitq.ErrOwnerConflict)
			assert.Contains(t, err.Error(), tc.conflict)
			assert.Equal(t, "failed_precondition", codeOf(err).String())
		})
	}
}
