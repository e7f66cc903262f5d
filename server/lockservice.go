package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
)

// List page sizes: the default when page_size is 0, and the most returned.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// lockService implements ticket.v1.LockService on a Node. Every request is
// validated first (bad input changes nothing and is never forwarded); writes
// and linearizable reads are then served by the promoted leader, or forwarded
// to it one hop (onLeader).
type lockService struct {
	n *Node
}

var _ ticketv1connect.LockServiceHandler = (*lockService)(nil)

// Acquire takes key for lease_ms milliseconds and returns its fencing token.
func (s *lockService) Acquire(ctx context.Context, req *ticketv1.AcquireRequest) (*ticketv1.AcquireResponse, error) {
	n := s.n
	invalid := errors.Join(core.ValidateKey(req.GetKey()), n.validateLease(req.GetLeaseMs()), core.ValidateOwner(req.GetOwner()),
		core.ValidateLockDelay(req.GetLockDelayMs(), n.cfg.Lease.MaxLockDelayMS))
	return onLeader(ctx, n, req, invalid, n.fwd.Lock, ticketv1connect.LockServiceClient.Acquire,
		func(ctx context.Context) (*ticketv1.AcquireResponse, error) {
			owner := req.GetOwner()
			if owner == "" {
				owner = n.newOwner()
			}
			res, err := n.acquire(ctx, req.GetKey(), req.GetLeaseMs(), owner, req.GetWait(), req.GetLockDelayMs())
			if err != nil {
				return nil, err
			}
			return &ticketv1.AcquireResponse{Token: res.Token, LeaseMs: res.LeaseMS}, nil
		})
}

// validateLease checks lease_ms against the configured bounds.
func (n *Node) validateLease(leaseMS int64) error {
	return core.ValidateLease(leaseMS, n.cfg.Lease.MinMS, n.cfg.Lease.MaxMS)
}

// Release ends the lock held with token; with force (admin), whatever lock
// key holds.
func (s *lockService) Release(ctx context.Context, req *ticketv1.ReleaseRequest) (*ticketv1.ReleaseResponse, error) {
	n := s.n
	invalid := errors.Join(core.ValidateKey(req.GetKey()), core.ValidateToken(req.GetToken()))
	if req.GetForce() {
		invalid = core.ValidateKey(req.GetKey())
	}
	return onLeader(ctx, n, req, invalid, n.fwd.Lock, ticketv1connect.LockServiceClient.Release,
		func(ctx context.Context) (*ticketv1.ReleaseResponse, error) {
			if req.GetForce() {
				if err := n.forceRelease(ctx, req.GetKey()); err != nil {
					return nil, err
				}
				return &ticketv1.ReleaseResponse{}, nil
			}
			if err := n.release(ctx, req.GetKey(), req.GetToken()); err != nil {
				return nil, err
			}
			return &ticketv1.ReleaseResponse{}, nil
		})
}

// release serves Release on the promoted leader: it proposes Release{key,
// token} (the state machine decides by token). A release of a lock this
// leader's table does not hold is answered without a log entry, once a quorum
// confirms the leadership and the table is current (ReadIndex): a deposed
// leader's stale table never refuses a release its successor would accept.
func (n *Node) release(ctx context.Context, key string, token uint64) error {
	notFound := func() error { return fmt.Errorf("no lock on %q with token %d: %w", key, token, ErrNotFound) }
	lk, ok := n.sm.Get(key)
	if !ok || lk.Token != token {
		if err := n.raft.ReadIndex(ctx); err != nil {
			return err
		}
		if lk, ok = n.sm.Get(key); !ok || lk.Token != token {
			return notFound()
		}
	}
	if err := n.mayTouchLock(ctx, lk); err != nil {
		return err
	}
	res, err := n.proposeRelease(ctx, lk)
	if err != nil {
		return err
	}
	if res.Outcome != core.OutcomeReleased {
		return notFound()
	}
	return nil
}

// forceRelease serves an admin's Release{force} on the promoted leader: it
// releases whatever lock key holds, read after a ReadIndex, whoever holds
// it, and writes the audit log. The interceptor has checked the admin
// permission (security.PermAdmin) when authorization is on.
func (n *Node) forceRelease(ctx context.Context, key string) error {
	if err := n.raft.ReadIndex(ctx); err != nil {
		return err
	}
	lk, ok := n.sm.Get(key)
	if !ok {
		return fmt.Errorf("no lock on %q: %w", key, ErrNotFound)
	}
	n.audit().Info("force-release requested", principalField(ctx), callerField(ctx),
		zap.String("key", key), zap.Uint64("token", lk.Token), zap.String("owner", lk.Owner), zap.String("lock_principal", lk.Principal))
	res, err := n.proposeRelease(ctx, lk)
	if err != nil {
		return err
	}
	if res.Outcome != core.OutcomeReleased {
		return fmt.Errorf("no lock on %q with token %d: %w", key, lk.Token, ErrNotFound)
	}
	n.audit().Info("lock force-released", principalField(ctx), zap.String("key", key), zap.Uint64("token", lk.Token))
	return nil
}

// Renew restarts the lease of the lock held with token (keep-alive).
func (s *lockService) Renew(ctx context.Context, req *ticketv1.RenewRequest) (*ticketv1.RenewResponse, error) {
	n := s.n
	invalid := errors.Join(core.ValidateKey(req.GetKey()), core.ValidateToken(req.GetToken()))
	return onLeader(ctx, n, req, invalid, n.fwd.Lock, ticketv1connect.LockServiceClient.Renew,
		func(ctx context.Context) (*ticketv1.RenewResponse, error) {
			if err := n.mayTouch(ctx, req.GetKey(), req.GetToken()); err != nil {
				return nil, err
			}
			leaseMS, err := n.renew(ctx, req.GetKey(), req.GetToken())
			if err != nil {
				return nil, err
			}
			return &ticketv1.RenewResponse{LeaseMs: leaseMS}, nil
		})
}

// GetLock reports the holder of key: linearizable on the leader (after a
// ReadIndex), or from this node's table when stale is set.
func (s *lockService) GetLock(ctx context.Context, req *ticketv1.GetLockRequest) (*ticketv1.GetLockResponse, error) {
	n := s.n
	invalid := core.ValidateKey(req.GetKey())
	read := func() (*ticketv1.GetLockResponse, error) { return n.lockInfo(req.GetKey()), nil }
	if req.GetStale() && invalid == nil {
		return staleRead(n, read)
	}
	return onLeader(ctx, n, req, invalid, n.fwd.Lock, ticketv1connect.LockServiceClient.GetLock, afterReadIndex(n, read))
}

// lockInfo describes key's holder in this node's table.
func (n *Node) lockInfo(key string) *ticketv1.GetLockResponse {
	lk, ok := n.sm.Get(key)
	if !ok {
		return &ticketv1.GetLockResponse{}
	}
	return &ticketv1.GetLockResponse{
		Held:        true,
		Token:       lk.Token,
		LeaseMs:     lk.LeaseMS,
		RemainingMs: n.remainingMS(lk),
		Owner:       lk.Owner,
	}
}

// remainingMS is the lease time left of lk in milliseconds by this node's
// own measure (every node tracks every lease from its own apply of the
// lock's last Grant or Renew; issue 15); -1 when this node does not track it.
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
	n := s.n
	size, after, invalid := listPage(req)
	read := func() (*ticketv1.ListLocksResponse, error) { return n.listLocks(req.GetPrefix(), after, size), nil }
	if req.GetStale() && invalid == nil {
		return staleRead(n, read)
	}
	return onLeader(ctx, n, req, invalid, n.fwd.Lock, ticketv1connect.LockServiceClient.ListLocks, afterReadIndex(n, read))
}

// listPage checks a ListLocks request and returns its page size and the key
// the page starts after (decoded from page_token).
func listPage(req *ticketv1.ListLocksRequest) (size int, after string, err error) {
	size = int(req.GetPageSize())
	switch {
	case size < 0:
		return 0, "", fmt.Errorf("%w: page_size %d is negative", core.ErrInvalidArgument, size)
	case size == 0:
		size = defaultPageSize
	case size > maxPageSize:
		size = maxPageSize
	}
	if len(req.GetPrefix()) > core.MaxKeyBytes {
		return 0, "", fmt.Errorf("%w: prefix is longer than %d bytes", core.ErrInvalidArgument, core.MaxKeyBytes)
	}
	if tok := req.GetPageToken(); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			return 0, "", fmt.Errorf("%w: malformed page_token", core.ErrInvalidArgument)
		}
		after = string(b)
	}
	return size, after, nil
}

// listLocks returns up to size locks of this node's table whose key starts
// with prefix and sorts after after, and the token of the next page.
func (n *Node) listLocks(prefix, after string, size int) *ticketv1.ListLocksResponse {
	locks, readIndex := n.rangeAt(prefix, after, size+1)
	out := &ticketv1.ListLocksResponse{ReadIndex: readIndex}
	if len(locks) > size {
		locks = locks[:size]
		out.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(locks[size-1].Key))
	}
	for _, lk := range locks {
		out.Locks = append(out.Locks, &ticketv1.Lock{
			Key: lk.Key, Token: lk.Token, LeaseMs: lk.LeaseMS, RemainingMs: n.remainingMS(lk), Owner: lk.Owner,
		})
	}
	return out
}

// CheckToken tells a downstream resource whether token still holds key
// (Chubby's CheckSequencer): linearizable, on the leader. A lock whose lease
// ran out but whose Expire has not applied yet is already invalid.
func (s *lockService) CheckToken(ctx context.Context, req *ticketv1.CheckTokenRequest) (*ticketv1.CheckTokenResponse, error) {
	n := s.n
	invalid := errors.Join(core.ValidateKey(req.GetKey()), core.ValidateToken(req.GetToken()))
	return onLeader(ctx, n, req, invalid, n.fwd.Lock, ticketv1connect.LockServiceClient.CheckToken,
		afterReadIndex(n, func() (*ticketv1.CheckTokenResponse, error) {
			lk, ok := n.sm.Get(req.GetKey())
			if !ok {
				return &ticketv1.CheckTokenResponse{}, nil
			}
			valid := lk.Token == req.GetToken() && !n.lessor.Expiring(lk.Key, lk.Token) && !n.isGhost(lk.Key, lk.Token)
			return &ticketv1.CheckTokenResponse{Valid: valid, CurrentToken: lk.Token}, nil
		}))
}

// staleRead serves read from this node's table without asking the leader,
// unless the node is still replaying its log after a restart: its table is
// then older than the one it served before it stopped, and a stale read
// would go backwards (issue 14, item 6). It then fails with ErrReplaying
// (Unavailable, retryable).
func staleRead[Res any](n *Node, read func() (*Res, error)) (*Res, error) {
	if st := n.raft.Status(); st.AppliedIndex < st.RecoveredCommitIndex {
		return nil, n.toConnect(fmt.Errorf("%w: applied index %d, recorded commit index %d", ErrReplaying, st.AppliedIndex, st.RecoveredCommitIndex))
	}
	return read()
}
