package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/lessor"
)

// This file is the renewal path on the leader: a Renew is a replicated
// command (docs/design.md#leases), admitted by the lessor and written in an
// entry of its own or shared with the renewals that arrive with it
// (renewbatch.go); every node restarts the lock's deadline when it applies
// it.

// renew serves Renew on the promoted leader and returns the lease in
// milliseconds. The lessor first decides, under its lock, that the lease has
// not run out and no Expire of it is decided or in flight; then core.Renew is
// proposed. A renewal admitted here that commits after an expiry round
// decided the lock's end still wins: that Expire carries the older seen index
// and removes nothing (core.ExpireSeen). A Renew that waits to share an
// entry is proposed detached from ctx (renewbatch.go): a client that goes
// away gets ctx's error, and its Renew may still commit, as with any
// proposal after a ctx error. A refusal (no
// such lock, lease run out) is given only after a quorum confirms leadership
// and the table has applied everything committed (ReadIndex), since a
// deposed leader's table is stale.
//
// Errors: a PermissionDenied connect error (the lock was acquired by another
// principal, authorization on), ErrHeldUnderSession (the lock is held under
// a session, which its KeepAlive renews), ErrNotFound (no lock with that
// token, or the Renew applied as NotFound: it was removed first),
// lessor.ErrExpired (its lease ran out), lessor.ErrNotPrimary, and the
// backend's Propose/ReadIndex errors.
func (n *Node) renew(ctx context.Context, key string, token uint64) (int64, error) {
	if err := n.heldUnderSession(ctx, key, token); err != nil {
		return 0, err
	}
	err := n.lessor.Renewable(key, token)
	if errors.Is(err, lessor.ErrNotHeld) || errors.Is(err, lessor.ErrExpired) {
		if err := n.raft.ReadIndex(ctx); err != nil {
			return 0, err
		}
		err = n.lessor.Renewable(key, token)
	}
	if err != nil {
		return 0, err
	}
	// The lessor tracks (key, token) only once its Grant has applied, so the
	// lock and its principal are in the table now: check the caller here,
	// after any ReadIndex, not only before it — a Renew of a token not yet
	// applied when the request arrived must not slip past the check and renew
	// another principal's lock once it appears
	// (docs/security.md#locks-are-bound-to-their-principal).
	if err := n.mayTouch(ctx, key, token); err != nil {
		return 0, err
	}
	if err := n.heldUnderSession(ctx, key, token); err != nil {
		return 0, err // appeared with the ReadIndex
	}
	res, err := n.proposeRenewal(ctx, renewal{key: key, token: token})
	if err != nil {
		return 0, err
	}
	if res.Outcome != core.OutcomeRenewed {
		return 0, fmt.Errorf("no lock on %q with token %d: %w", key, token, ErrNotFound)
	}
	return res.LeaseMS, nil
}

// heldUnderSession refuses, with ErrHeldUnderSession, a Renew of the holder
// (key, token) when it is held under a session: its lease is its session's
// (docs/design.md#sessions). The caller's permission is checked first, so
// another principal learns nothing more than PermissionDenied. A holder's
// session never changes, so no ReadIndex is needed before this refusal.
func (n *Node) heldUnderSession(ctx context.Context, key string, token uint64) error {
	lk, ok := n.sm.Holder(key, token)
	if !ok || lk.Session == 0 {
		return nil
	}
	if err := n.mayTouchLock(ctx, lk); err != nil {
		return err
	}
	return fmt.Errorf("%w (session %d; lock on %q, token %d)", ErrHeldUnderSession, lk.Session, key, token)
}
