package server

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/lessor"
	"github.com/ticketd/ticketd/server/waitq"
)

// codeOf is the single mapping from ticketd errors to connect codes, one
// meaning per code (DESIGN.md, API; docs/api.md lists them):
//
//   - InvalidArgument: bad input (empty or oversize key, lease_ms outside the
//     configured bounds, token 0, bad member fields); nothing changed.
//   - AlreadyExists: the key is held and the request did not wait.
//   - NotFound: no lock is held on the key with that token (never granted,
//     released, or its lease ran out).
//   - Unavailable: not the leader, no leader yet, or shutting down; retry,
//     at the leader named in the LeaderHint detail when there is one.
//   - DeadlineExceeded: the request's deadline passed (waiting ran out).
//   - ResourceExhausted: the lock table or the key's wait queue is full.
//   - Canceled: the client went away.
//   - Internal: anything else (a bug; logged at Warn).
func codeOf(err error) connect.Code {
	switch {
	case errors.Is(err, core.ErrInvalidArgument), errors.Is(err, ErrNoMember):
		return connect.CodeInvalidArgument
	case errors.Is(err, waitq.ErrHeld):
		return connect.CodeAlreadyExists
	case errors.Is(err, ErrNotFound), errors.Is(err, lessor.ErrNotHeld), errors.Is(err, lessor.ErrExpired):
		return connect.CodeNotFound
	case errors.Is(err, core.ErrNotLeader), errors.Is(err, core.ErrStopped),
		errors.Is(err, waitq.ErrClosed), errors.Is(err, lessor.ErrNotPrimary), errors.Is(err, lessor.ErrClosed):
		return connect.CodeUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return connect.CodeDeadlineExceeded
	case errors.Is(err, context.Canceled):
		return connect.CodeCanceled
	case errors.Is(err, waitq.ErrFull), errors.Is(err, ErrTooManyLocks):
		return connect.CodeResourceExhausted
	}
	return connect.CodeInternal
}

// toConnect turns err into the *connect.Error a handler returns. An error that
// already is a *connect.Error (a forwarded call's) passes through. Unavailable
// errors carry a ticket.v1.LeaderHint detail naming the leader when one other
// than this node is known, so clients retry there directly.
func (n *Node) toConnect(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	code := codeOf(err)
	out := connect.NewError(code, err)
	if code != connect.CodeUnavailable {
		return out
	}
	var leader core.Member
	var nle *core.NotLeaderError
	if errors.As(err, &nle) {
		leader = nle.Leader
	}
	if leader.ID == "" {
		leader, _ = n.leaderMember()
	}
	if leader.ID == "" || leader.ID == n.cfg.ID {
		return out
	}
	if leader.APIAddr == "" {
		leader.APIAddr, _ = n.sm.MemberAPIAddr(leader.ID)
	}
	if d, derr := connect.NewErrorDetail(&ticketv1.LeaderHint{LeaderId: leader.ID, LeaderAddr: leader.APIAddr}); derr == nil {
		out.AddDetail(d)
	}
	return out
}
