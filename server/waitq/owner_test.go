package waitq_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/waitq"
)

// These tests cover the retry rule (owner.go): a request whose owner holds
// the key, or has a grant in flight or a request queued for it, is refused
// when it asks another mode, limit or session, and is a retry when it asks
// the same.

// TestOwnerConflict checks every way a same-owner request can differ from
// the owner's holder, grant in flight or waiter: it fails at once with an
// *OwnerConflictError naming what the owner has, with or without wait, and
// nothing else in the queue changes.
func TestOwnerConflict(t *testing.T) {
	inSession := func(r waitq.Request, s uint64) waitq.Request { r.Session = s; return r }
	tests := []struct {
		name  string
		state waitq.KeyState
		setup func(t *testing.T, q *waitq.Queue)
		req   waitq.Request
		held  bool
		say   string // in the message: what the owner has
	}{
		{name: "shared_holder_exclusive_request", state: heldShared("o", "p"), req: excl("k", "o", true),
			held: true, say: "as a shared lock (no session)"},
		{name: "exclusive_holder_shared_request", state: heldBy("o"), req: shared("k", "o", false),
			held: true, say: "as an exclusive lock"},
		{name: "semaphore_holder_other_limit", state: heldSemaphore(2, "o"), req: slot("k", "o", 3, true),
			held: true, say: "a semaphore slot (limit 2)"},
		{name: "semaphore_holder_exclusive_request", state: heldSemaphore(2, "o"), req: excl("k", "o", false),
			held: true, say: "a semaphore slot (limit 2)"},
		{name: "session_holder_no_session", state: waitq.KeyState{Holders: []waitq.Holder{{Owner: "o", Session: 7}}},
			req: excl("k", "o", true), held: true, say: "under session 7"},
		{name: "holder_other_session", state: heldBy("o"), req: inSession(excl("k", "o", true), 9),
			held: true, say: "an exclusive lock (no session)"},
		{name: "shared_grant_in_flight", setup: func(t *testing.T, q *waitq.Queue) {
			mustTurn(t, q, shared("k", "o", true))
		}, req: excl("k", "o", true), say: "is already acquiring key \"k\" as a shared lock"},
		{name: "session_grant_in_flight", setup: func(t *testing.T, q *waitq.Queue) {
			mustTurn(t, q, inSession(excl("k", "o", true), 5))
		}, req: excl("k", "o", false), say: "under session 5"},
		{name: "shared_waiter", state: heldBy("a"), setup: func(t *testing.T, q *waitq.Queue) {
			enterReq(t, q, context.Background(), shared("k", "o", true), make(chan entered, 1))
		}, req: excl("k", "o", true), say: "is already acquiring key \"k\" as a shared lock"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, tb := newQueue(t, 0)
			tb.set("k", tc.state)
			if tc.setup != nil {
				tc.setup(t, q)
			}
			waiting, inflight := q.Waiting(), q.Inflight()
			// Entered in the background so that a request wrongly queued
			// fails the test (recv) instead of hanging it.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := make(chan entered, 1)
			go func() {
				turn, err := q.Enter(ctx, tc.req)
				out <- entered{tc.req.Owner, turn, err}
			}()
			err := recv(t, out).err
			require.ErrorIs(t, err, waitq.ErrOwnerConflict)
			var oc *waitq.OwnerConflictError
			require.ErrorAs(t, err, &oc)
			assert.Equal(t, tc.held, oc.Held)
			assert.Contains(t, err.Error(), tc.say)
			assert.Equal(t, waiting, q.Waiting())
			assert.Equal(t, inflight, q.Inflight())
		})
	}
}

// TestOwnerSameKindIsRetry checks that a request asking what the owner
// holds is still a retry (a turn at once, beside a shared co-holder), and
// that a holder being removed does not refuse another kind: the request
// waits for the removal, first, and is then granted its own kind.
func TestOwnerSameKindIsRetry(t *testing.T) {
	q, tb := newQueue(t, 0)
	tb.set("k", heldShared("o", "p"))
	mustTurn(t, q, shared("k", "o", false)).Done()

	ks := waitq.KeyState{Mode: core.ModeShared, Holders: []waitq.Holder{{Owner: "o", Removing: true}}}
	tb.set("k", ks)
	out := make(chan entered, 1)
	enterReq(t, q, context.Background(), excl("k", "o", true), out)
	none(t, out)
	tb.set("k", waitq.KeyState{})
	q.Kick("k")
	got := recv(t, out)
	require.NoError(t, got.err)
	got.turn.Done()
}
