package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
)

// This file is the Acquire RPC: its validation and its hand-over to the
// leader's grant path (grant.go).

// MaxLimit is the largest semaphore limit an Acquire may give
// (AcquireRequest.limit, holders); a larger one is InvalidArgument. It is a
// server-side bound, not core's: it keeps one key's holder list, which the
// wait queue and every read of the key walk, small.
const MaxLimit = 4096

// Acquire takes key for lease_ms milliseconds (or under a session, for the
// session's TTL) and returns its fencing token. With mode MODE_SHARED the
// holder shares the key with other shared holders; with limit N > 0 the key
// is a counting semaphore of up to N holders
// (docs/semantics.md#shared-locks-semaphores-and-sessions).
func (s *lockService) Acquire(ctx context.Context, req *ticketv1.AcquireRequest) (*ticketv1.AcquireResponse, error) {
	n := s.n
	mode, modeErr := modeOf(req.GetMode())
	lease := n.validateLease(req.GetLeaseMs())
	if req.GetSession() != 0 {
		lease = nil // the session's TTL applies; lease_ms may be 0
	}
	invalid := errors.Join(core.ValidateKey(req.GetKey()), lease, core.ValidateOwner(req.GetOwner()),
		core.ValidateLockDelay(req.GetLockDelayMs(), n.cfg.Lease.MaxLockDelayMS), modeErr,
		validateLimit(mode, req.GetLimit()))
	return onLeader(ctx, n, req, invalid, n.fwd.Lock, ticketv1connect.LockServiceClient.Acquire,
		func(ctx context.Context) (*ticketv1.AcquireResponse, error) {
			owner := req.GetOwner()
			if owner == "" {
				owner = n.newOwner()
			}
			res, err := n.acquire(ctx, acquireRequest{
				key: req.GetKey(), leaseMS: req.GetLeaseMs(), owner: owner, wait: req.GetWait(),
				lockDelayMS: req.GetLockDelayMs(), mode: mode, limit: req.GetLimit(), session: req.GetSession(),
			})
			if err != nil {
				return nil, err
			}
			return &ticketv1.AcquireResponse{Token: res.Token, LeaseMs: res.LeaseMS, Session: res.Session}, nil
		})
}

// modeOf turns the API's mode into core's. Errors: a *core.FieldError
// (InvalidArgument) for a mode the API does not define.
func modeOf(m ticketv1.Mode) (core.Mode, error) {
	switch m {
	case ticketv1.Mode_MODE_EXCLUSIVE:
		return core.ModeExclusive, nil
	case ticketv1.Mode_MODE_SHARED:
		return core.ModeShared, nil
	}
	return core.ModeExclusive, &core.FieldError{Field: "mode",
		Msg: fmt.Sprintf("mode %d is unknown (MODE_EXCLUSIVE or MODE_SHARED)", int32(m))}
}

// validateLimit checks a semaphore limit: at most MaxLimit, and not with the
// shared mode (core.ValidateMode). Errors: *core.FieldError (InvalidArgument).
func validateLimit(mode core.Mode, limit uint32) error {
	if limit > MaxLimit {
		return &core.FieldError{Field: "limit", Msg: fmt.Sprintf("limit %d is above the largest allowed, %d", limit, MaxLimit)}
	}
	return core.ValidateMode(mode, limit)
}

// validateLease checks lease_ms against the configured bounds.
func (n *Node) validateLease(leaseMS int64) error {
	return core.ValidateLease(leaseMS, n.cfg.Lease.MinMS, n.cfg.Lease.MaxMS)
}
