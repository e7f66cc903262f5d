package server

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/httpapi"
	"github.com/ticketd/ticketd/server/lessor"
	"github.com/ticketd/ticketd/server/security"
)

// This file is the session RPCs (docs/design.md#sessions; etcd leases, Consul
// sessions): CreateSession, KeepAlive and CloseSession, each one Raft entry
// proposed by the promoted leader (followers forward, as for every write). A
// session's lease is timed by every node's lessor from its own apply, like a
// lock's; the leader's lessor proposes core.ExpireSession when it runs out.

// CreateSession opens a session of ttl_ms milliseconds bound to the caller's
// principal and returns its id (the log index of its entry). Not idempotent:
// a retried call opens another session, whose lease simply runs out.
// Errors: InvalidArgument (ttl_ms outside the lease bounds),
// ResourceExhausted (limits.max_sessions open, or, with authorization on,
// limits.max_sessions_per_principal of the caller's; sessioncount.go),
// Unavailable.
func (s *lockService) CreateSession(ctx context.Context, req *ticketv1.CreateSessionRequest) (*ticketv1.CreateSessionResponse, error) {
	n := s.n
	return onLeader(ctx, n, req, n.validateTTL(req.GetTtlMs()), n.fwd.Lock, ticketv1connect.LockServiceClient.CreateSession,
		func(ctx context.Context) (*ticketv1.CreateSessionResponse, error) {
			principal := n.grantPrincipal(ctx)
			done, err := n.admitSessionCreate(principal)
			if err != nil {
				return nil, err
			}
			defer done()
			res, err := n.raft.Propose(ctx, core.CreateSession(req.GetTtlMs()).WithPrincipal(principal))
			if err != nil {
				return nil, err
			}
			if res.Outcome != core.OutcomeSessionCreated {
				return nil, fmt.Errorf("create session: unexpected outcome %s", res.Outcome)
			}
			n.log.Debug("session created", zap.Uint64("session", res.Session), zap.Int64("ttl_ms", res.LeaseMS))
			return &ticketv1.CreateSessionResponse{Session: res.Session, TtlMs: res.LeaseMS}, nil
		})
}

// validateTTL checks a session's ttl_ms against the lease bounds (as
// lease_ms is checked). Errors: a *core.FieldError naming "ttl_ms".
func (n *Node) validateTTL(ttlMS int64) error {
	return core.ValidateTTL(ttlMS, n.cfg.Lease.MinMS, n.cfg.Lease.MaxMS)
}

// KeepAlive restarts the lease of a session, and with it every lock held
// under it, in one Raft entry (core.KeepAliveSession). Errors:
// InvalidArgument (session 0), NotFound (unknown or ended session, its
// lease already ran out, or another principal's session: the same answer,
// so that nobody learns which ids exist), Unavailable.
func (s *lockService) KeepAlive(ctx context.Context, req *ticketv1.KeepAliveRequest) (*ticketv1.KeepAliveResponse, error) {
	n := s.n
	return onLeader(ctx, n, req, core.ValidateSession(req.GetSession()), n.fwd.Lock, ticketv1connect.LockServiceClient.KeepAlive,
		func(ctx context.Context) (*ticketv1.KeepAliveResponse, error) {
			ttlMS, err := n.keepAlive(ctx, req.GetSession())
			if err != nil {
				return nil, err
			}
			return &ticketv1.KeepAliveResponse{TtlMs: ttlMS}, nil
		})
}

// keepAlive serves KeepAlive on the promoted leader and returns the
// session's TTL in milliseconds. The lessor first decides, under its lock,
// that the session's lease has not run out and no ExpireSession of it is
// decided or in flight (lessor.SessionRenewable); a KeepAlive admitted here
// that commits after an expiry was decided still wins (the ExpireSession
// carries the older seen index). Refusals (no such session, lease run out)
// are given only after a ReadIndex, since a deposed leader's table is stale.
// Only the session's principal may keep it alive (not even an admin: a
// session is its client's liveness, which nobody else can vouch for).
// Concurrent KeepAlives of one session share entries (keepalivebatch.go).
func (n *Node) keepAlive(ctx context.Context, id uint64) (int64, error) {
	sess, ok := n.sm.Session(id)
	err := n.lessor.SessionRenewable(id)
	if !ok || errors.Is(err, lessor.ErrNotHeld) || errors.Is(err, lessor.ErrExpired) {
		if err := n.raft.ReadIndex(ctx); err != nil {
			return 0, err
		}
		sess, ok = n.sm.Session(id)
		err = n.lessor.SessionRenewable(id)
	}
	if !ok {
		return 0, &SessionNotFoundError{Session: id}
	}
	if err := n.ownSession(ctx, sess, false); err != nil {
		return 0, err
	}
	if err != nil {
		return 0, err
	}
	return n.proposeKeepAlive(ctx, id)
}

// CloseSession ends a session and releases every lock held under it, in one
// Raft entry (core.CloseSession; RELEASED watch events). Errors:
// InvalidArgument (session 0), NotFound (unknown or already ended, or
// another principal's session unless the caller is an admin: the same
// answer as an unknown one), Unavailable.
func (s *lockService) CloseSession(ctx context.Context, req *ticketv1.CloseSessionRequest) (*ticketv1.CloseSessionResponse, error) {
	n := s.n
	return onLeader(ctx, n, req, core.ValidateSession(req.GetSession()), n.fwd.Lock, ticketv1connect.LockServiceClient.CloseSession,
		func(ctx context.Context) (*ticketv1.CloseSessionResponse, error) {
			if err := n.closeSession(ctx, req.GetSession()); err != nil {
				return nil, err
			}
			return &ticketv1.CloseSessionResponse{}, nil
		})
}

// closeSession serves CloseSession on the promoted leader. An unknown
// session is refused only after a ReadIndex. An admin closing another
// principal's session is written to the audit log.
func (n *Node) closeSession(ctx context.Context, id uint64) error {
	sess, ok := n.sm.Session(id)
	if !ok {
		if err := n.raft.ReadIndex(ctx); err != nil {
			return err
		}
		if sess, ok = n.sm.Session(id); !ok {
			return &SessionNotFoundError{Session: id}
		}
	}
	if err := n.ownSession(ctx, sess, true); err != nil {
		return err
	}
	res, err := n.proposeClose(ctx, id)
	if err != nil {
		return err
	}
	if res.Outcome != core.OutcomeReleased {
		return &SessionNotFoundError{Session: id}
	}
	if p, _ := security.PrincipalFrom(ctx); p.Name != sess.Principal {
		n.audit().Info("session closed by another principal", principalField(ctx), httpapi.AuditCaller(ctx),
			zap.Uint64("session", id), zap.String("session_principal", sess.Principal), zap.Int("locks", len(res.Ended.Locks)))
	}
	return nil
}

// proposeClose proposes core.CloseSession(id) on the promoted leader,
// detached from ctx (bounded by proposeTimeout and the node's life), with
// session id marked closing until the proposal returns
// (lessor.Lessor.MarkClosing): its holders count as being removed
// (Node.ending), so that no grant is proposed beside a
// holder with a lock-delay while the close that would start the delay is in
// flight, and none is handed to its owner (docs/design.md#lock-delay, as for
// an Expire in flight). The mark outlives a client that goes away, since its
// entry may still apply. If the proposal fails, the session's keys are kicked:
// their waiters look again. Errors: ctx's, ErrOutcomeUnknown (the proposal
// timed out inside the server), and the backend's Propose errors.
func (n *Node) proposeClose(ctx context.Context, id uint64) (core.Result, error) {
	type outcome struct {
		res core.Result
		err error
	}
	out := make(chan outcome, 1)
	n.lessor.MarkClosing(id)
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		pctx := n.detached()
		res, err := n.raft.Propose(pctx, core.CloseSession(id))
		if err != nil && pctx.Err() != nil && n.life.Err() == nil {
			err = fmt.Errorf("%w: close of session %d: %v", ErrOutcomeUnknown, id, err)
		}
		n.lessor.UnmarkClosing(id)
		if err != nil {
			for _, lk := range n.sm.SessionLocks(id) {
				n.queue.Kick(lk.Key)
			}
		}
		out <- outcome{res, err}
	}()
	select {
	case o := <-out:
		return o.res, o.err
	case <-ctx.Done():
		return core.Result{}, ctx.Err()
	}
}

// ownSession refuses a request on sess by a principal other than the one
// that opened it, when authorization is on; with admin set an admin may
// act on anyone's session (security.Authenticator.MayActFor, the one
// ownership check of locks and sessions). The refusal is the *SessionNotFoundError an
// unknown id gets, code and message alike (as mayUseSession answers an
// Acquire): a distinct PermissionDenied would let anyone probe which
// session ids are open.
func (n *Node) ownSession(ctx context.Context, sess core.Session, admin bool) error {
	if n.authn().MayActFor(ctx, sess.Principal, admin) {
		return nil
	}
	return &SessionNotFoundError{Session: sess.ID}
}

// mayUseSession refuses, with a *SessionNotFoundError, an Acquire under
// session id that this leader's table shows unknown, ended or opened by
// another principal than the caller's (core.OutcomeSessionNotFound would
// say the same, but only after a log entry): the refusal is given only
// after a ReadIndex, so a deposed leader's stale table never refuses a
// session its successor knows. The acquire path calls it before it queues;
// nil when id is 0.
//
// It is not the ownership check (ownSession): it predicts core's rule that a
// Grant under a session carries the session's principal, and a Grant is
// bound to grantPrincipal, "" with authorization off, so an admin may not
// lock under another principal's session, nor anyone, with authorization
// off, under a session opened while it was on.
func (n *Node) mayUseSession(ctx context.Context, id uint64) error {
	if id == 0 {
		return nil
	}
	principal := n.grantPrincipal(ctx)
	usable := func() bool {
		sess, ok := n.sm.Session(id)
		return ok && sess.Principal == principal
	}
	if usable() {
		return nil
	}
	if err := n.raft.ReadIndex(ctx); err != nil {
		return err
	}
	if usable() {
		return nil
	}
	return &SessionNotFoundError{Session: id}
}
