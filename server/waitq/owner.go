package waitq

import (
	"errors"
	"fmt"

	"github.com/ticketd/ticketd/core"
)

// This file is the retry rule of the queue (docs/semantics.md, retries): a
// request whose owner already holds the key, or has a request for it queued
// or in flight, is a retry of that request only if it asks the same thing
// (mode, limit and session); one that asks another thing is refused, never
// answered with the other holder's token.

// ErrOwnerConflict: the request's owner already holds the key, or already
// has a request for it queued or in flight, with another mode, limit or
// session. The state machine treats any Grant of the same owner (and
// principal) as an idempotent retry of its holder, whatever it asks
// (docs/design.md#replicated-commands), so such a request must never be
// proposed: the owner would take, say, a shared holder's token for the
// exclusive lock it asked for while other readers hold the key. Returned as
// an *OwnerConflictError; the API maps it to FailedPrecondition.
var ErrOwnerConflict = errors.New("owner already acquired the key in another mode")

// OwnerConflictError is the ErrOwnerConflict of a request for Key whose owner
// already holds it (Held), or is acquiring it (a request queued or in
// flight), as Mode, Limit and Session. errors.Is(err, ErrOwnerConflict) is
// true for it.
type OwnerConflictError struct {
	Key string
	// Held is true when the owner holds the key in the lock table, false
	// when its other request is queued or in flight.
	Held    bool
	Mode    core.Mode
	Limit   uint32
	Session uint64
}

// Error implements error, saying how the owner holds or is acquiring the key.
func (e *OwnerConflictError) Error() string {
	verb := "holds"
	if !e.Held {
		verb = "is already acquiring"
	}
	return fmt.Sprintf("the owner %s key %q as %s: a retry must ask the same mode, limit and session "+
		"(give another owner id for another request)", verb, e.Key, describeKind(e.Mode, e.Limit, e.Session))
}

// Is reports whether target is ErrOwnerConflict.
func (e *OwnerConflictError) Is(target error) bool { return target == ErrOwnerConflict }

// describeKind names a holder's or request's mode, limit and session in the
// user's terms.
func describeKind(mode core.Mode, limit uint32, session uint64) string {
	s := "an exclusive lock"
	switch {
	case limit > 0:
		s = fmt.Sprintf("a semaphore slot (limit %d)", limit)
	case mode == core.ModeShared:
		s = "a shared lock"
	}
	if session != 0 {
		return fmt.Sprintf("%s under session %d", s, session)
	}
	return s + " (no session)"
}

// kind is what a request asks or a holder has: its mode, limit and session.
// A semaphore slot is ModeExclusive whatever the request said
// (core.ValidateMode refuses a shared one; the table stores it exclusive).
type kind struct {
	mode    core.Mode
	limit   uint32
	session uint64
}

// kindOf returns the kind of a request, turn or holder.
func kindOf(mode core.Mode, limit uint32, session uint64) kind {
	if limit > 0 {
		mode = core.ModeExclusive
	}
	return kind{mode, limit, session}
}

// ownerConflict returns the *OwnerConflictError of w, or nil: w's owner holds
// the key (not being removed) with another kind than w asks, or has a grant
// in flight or a request queued for it with another kind. A holder being
// removed does not count: it is never handed out again, and a retry waits
// for its removal and then gets a grant of its own kind (see Enter). sh.mu
// held.
func ownerConflict(key string, ks KeyState, st *keyState, w *waiter) error {
	want := kindOf(w.mode, w.limit, w.session)
	for _, h := range ks.Holders {
		if h.Owner != w.owner || h.Removing {
			continue
		}
		if have := kindOf(ks.Mode, ks.Limit, h.Session); have != want {
			return &OwnerConflictError{Key: key, Held: true, Mode: have.mode, Limit: have.limit, Session: have.session}
		}
	}
	for _, t := range st.flights {
		if t.owner == w.owner {
			if have := kindOf(t.mode, t.limit, t.session); have != want {
				return &OwnerConflictError{Key: key, Mode: have.mode, Limit: have.limit, Session: have.session}
			}
		}
	}
	for _, x := range st.queue {
		if x.owner == w.owner {
			if have := kindOf(x.mode, x.limit, x.session); have != want {
				return &OwnerConflictError{Key: key, Mode: have.mode, Limit: have.limit, Session: have.session}
			}
		}
	}
	return nil
}
