package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/forward"
)

// List page sizes: the default when page_size is 0, and the most returned.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// lockService implements ticket.v1.LockService on a Node. Every request is
// validated first (bad input changes nothing and is never forwarded); writes
// and linearizable reads are then served by the promoted leader, or forwarded
// to it one hop.
type lockService struct {
	n *Node
}

var _ ticketv1connect.LockServiceHandler = (*lockService)(nil)

// Acquire takes key for lease_ms milliseconds and returns its fencing token.
func (s *lockService) Acquire(ctx context.Context, req *ticketv1.AcquireRequest) (*ticketv1.AcquireResponse, error) {
	res, err := s.acquire(ctx, req)
	return res, s.n.toConnect(err)
}

func (s *lockService) acquire(ctx context.Context, req *ticketv1.AcquireRequest) (*ticketv1.AcquireResponse, error) {
	n := s.n
	if err := errors.Join(core.ValidateKey(req.GetKey()), n.validateLease(req.GetLeaseMs()), core.ValidateOwner(req.GetOwner())); err != nil {
		return nil, err
	}
	leader, local, err := n.route(ctx)
	if err != nil {
		return nil, err
	}
	if !local {
		return forward.Call(ctx, n.fwd, leader.ID, n.fwd.Lock(leader.APIAddr).Acquire, req)
	}
	owner := req.GetOwner()
	if owner == "" {
		owner = n.newOwner()
	}
	res, err := n.acquire(ctx, req.GetKey(), req.GetLeaseMs(), owner, req.GetWait())
	if err != nil {
		return nil, err
	}
	return &ticketv1.AcquireResponse{Token: res.Token, LeaseMs: res.LeaseMS}, nil
}

// validateLease checks lease_ms against the configured bounds.
func (n *Node) validateLease(leaseMS int64) error {
	return core.ValidateLease(leaseMS, n.cfg.Lease.MinMS, n.cfg.Lease.MaxMS)
}

// Release ends the lock held with token.
func (s *lockService) Release(ctx context.Context, req *ticketv1.ReleaseRequest) (*ticketv1.ReleaseResponse, error) {
	res, err := s.release(ctx, req)
	return res, s.n.toConnect(err)
}

func (s *lockService) release(ctx context.Context, req *ticketv1.ReleaseRequest) (*ticketv1.ReleaseResponse, error) {
	n := s.n
	if err := errors.Join(core.ValidateKey(req.GetKey()), core.ValidateToken(req.GetToken())); err != nil {
		return nil, err
	}
	leader, local, err := n.route(ctx)
	if err != nil {
		return nil, err
	}
	if !local {
		return forward.Call(ctx, n.fwd, leader.ID, n.fwd.Lock(leader.APIAddr).Release, req)
	}
	// A release of a lock this leader does not hold is answered without a log
	// entry, once leadership is confirmed (this table is then current).
	if lk, ok := n.sm.Get(req.GetKey()); !ok || lk.Token != req.GetToken() {
		if err := n.raft.ReadIndex(ctx); err != nil {
			return nil, err
		}
		if lk, ok := n.sm.Get(req.GetKey()); !ok || lk.Token != req.GetToken() {
			return nil, fmt.Errorf("%w: key %q token %d", ErrNotFound, req.GetKey(), req.GetToken())
		}
	}
	res, err := n.raft.Propose(ctx, core.Release(req.GetKey(), req.GetToken()))
	if err != nil {
		return nil, err
	}
	if res.Outcome != core.OutcomeReleased {
		return nil, fmt.Errorf("%w: key %q token %d", ErrNotFound, req.GetKey(), req.GetToken())
	}
	return &ticketv1.ReleaseResponse{}, nil
}

// Renew restarts the lease of the lock held with token (keep-alive).
func (s *lockService) Renew(ctx context.Context, req *ticketv1.RenewRequest) (*ticketv1.RenewResponse, error) {
	res, err := s.renew(ctx, req)
	return res, s.n.toConnect(err)
}

func (s *lockService) renew(ctx context.Context, req *ticketv1.RenewRequest) (*ticketv1.RenewResponse, error) {
	n := s.n
	if err := errors.Join(core.ValidateKey(req.GetKey()), core.ValidateToken(req.GetToken())); err != nil {
		return nil, err
	}
	leader, local, err := n.route(ctx)
	if err != nil {
		return nil, err
	}
	if !local {
		return forward.Call(ctx, n.fwd, leader.ID, n.fwd.Lock(leader.APIAddr).Renew, req)
	}
	leaseMS, err := n.lessor.Renew(ctx, req.GetKey(), req.GetToken())
	if err != nil {
		return nil, err
	}
	return &ticketv1.RenewResponse{LeaseMs: leaseMS}, nil
}

// GetLock reports the holder of key: linearizable on the leader (after a
// ReadIndex), or from this node's table when stale is set.
func (s *lockService) GetLock(ctx context.Context, req *ticketv1.GetLockRequest) (*ticketv1.GetLockResponse, error) {
	res, err := s.getLock(ctx, req)
	return res, s.n.toConnect(err)
}

func (s *lockService) getLock(ctx context.Context, req *ticketv1.GetLockRequest) (*ticketv1.GetLockResponse, error) {
	n := s.n
	if err := core.ValidateKey(req.GetKey()); err != nil {
		return nil, err
	}
	if !req.GetStale() {
		leader, local, err := n.route(ctx)
		if err != nil {
			return nil, err
		}
		if !local {
			return forward.Call(ctx, n.fwd, leader.ID, n.fwd.Lock(leader.APIAddr).GetLock, req)
		}
		if err := n.raft.ReadIndex(ctx); err != nil {
			return nil, err
		}
	}
	lk, ok := n.sm.Get(req.GetKey())
	if !ok {
		return &ticketv1.GetLockResponse{}, nil
	}
	return &ticketv1.GetLockResponse{
		Held:        true,
		Token:       lk.Token,
		LeaseMs:     lk.LeaseMS,
		RemainingMs: n.remainingMS(lk),
		Owner:       lk.Owner,
	}, nil
}

// remainingMS is the lease time left of lk in milliseconds, as the leader's
// lessor measures it; -1 when unknown (this node is not the leader).
func (n *Node) remainingMS(lk core.Lock) int64 {
	d, ok := n.lessor.Remaining(lk.Key, lk.Token)
	if !ok {
		return -1
	}
	return d.Milliseconds()
}

// ListLocks lists held locks whose key starts with prefix, in key order, a
// page at a time.
func (s *lockService) ListLocks(ctx context.Context, req *ticketv1.ListLocksRequest) (*ticketv1.ListLocksResponse, error) {
	res, err := s.listLocks(ctx, req)
	return res, s.n.toConnect(err)
}

func (s *lockService) listLocks(ctx context.Context, req *ticketv1.ListLocksRequest) (*ticketv1.ListLocksResponse, error) {
	n := s.n
	size := int(req.GetPageSize())
	switch {
	case size < 0:
		return nil, fmt.Errorf("%w: page_size %d is negative", core.ErrInvalidArgument, size)
	case size == 0:
		size = defaultPageSize
	case size > maxPageSize:
		size = maxPageSize
	}
	if len(req.GetPrefix()) > core.MaxKeyBytes {
		return nil, fmt.Errorf("%w: prefix is longer than %d bytes", core.ErrInvalidArgument, core.MaxKeyBytes)
	}
	after := ""
	if tok := req.GetPageToken(); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			return nil, fmt.Errorf("%w: malformed page_token", core.ErrInvalidArgument)
		}
		after = string(b)
	}
	if !req.GetStale() {
		leader, local, err := n.route(ctx)
		if err != nil {
			return nil, err
		}
		if !local {
			return forward.Call(ctx, n.fwd, leader.ID, n.fwd.Lock(leader.APIAddr).ListLocks, req)
		}
		if err := n.raft.ReadIndex(ctx); err != nil {
			return nil, err
		}
	}
	locks := n.sm.Range(req.GetPrefix(), after, size+1)
	out := &ticketv1.ListLocksResponse{}
	if len(locks) > size {
		locks = locks[:size]
		out.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(locks[size-1].Key))
	}
	for _, lk := range locks {
		out.Locks = append(out.Locks, &ticketv1.Lock{
			Key: lk.Key, Token: lk.Token, LeaseMs: lk.LeaseMS, RemainingMs: n.remainingMS(lk), Owner: lk.Owner,
		})
	}
	return out, nil
}

// CheckToken tells a downstream resource whether token still holds key
// (Chubby's CheckSequencer): linearizable, on the leader. A lock whose lease
// ran out but whose Expire has not applied yet is already invalid.
func (s *lockService) CheckToken(ctx context.Context, req *ticketv1.CheckTokenRequest) (*ticketv1.CheckTokenResponse, error) {
	res, err := s.checkToken(ctx, req)
	return res, s.n.toConnect(err)
}

func (s *lockService) checkToken(ctx context.Context, req *ticketv1.CheckTokenRequest) (*ticketv1.CheckTokenResponse, error) {
	n := s.n
	if err := errors.Join(core.ValidateKey(req.GetKey()), core.ValidateToken(req.GetToken())); err != nil {
		return nil, err
	}
	leader, local, err := n.route(ctx)
	if err != nil {
		return nil, err
	}
	if !local {
		return forward.Call(ctx, n.fwd, leader.ID, n.fwd.Lock(leader.APIAddr).CheckToken, req)
	}
	if err := n.raft.ReadIndex(ctx); err != nil {
		return nil, err
	}
	lk, ok := n.sm.Get(req.GetKey())
	if !ok {
		return &ticketv1.CheckTokenResponse{}, nil
	}
	valid := lk.Token == req.GetToken() && !n.lessor.Expiring(lk.Key, lk.Token) && !n.isGhost(lk.Key, lk.Token)
	return &ticketv1.CheckTokenResponse{Valid: valid, CurrentToken: lk.Token}, nil
}
