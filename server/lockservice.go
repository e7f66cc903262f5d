package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/httpapi"
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

// Release ends the holder of key with token (one holder of a shared key or
// semaphore; a holder under a session may be released on its own); with
// force (admin), every holder of key.
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
	lk, ok := n.sm.Holder(key, token)
	if !ok {
		if err := n.raft.ReadIndex(ctx); err != nil {
			return err
		}
		if lk, ok = n.sm.Holder(key, token); !ok {
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
// releases every holder key has, read after a ReadIndex, whoever holds
// them, and writes the audit log (one line per holder). The Releases of
// several holders are proposed together (group-committed). It fails with
// ErrNotFound only when no holder was released (the key was free, or every
// holder went first). The interceptor has checked the admin permission
// (security.PermAdmin) when authorization is on.
func (n *Node) forceRelease(ctx context.Context, key string) error {
	if err := n.raft.ReadIndex(ctx); err != nil {
		return err
	}
	holders := n.sm.Holders(key)
	if len(holders) == 0 {
		return fmt.Errorf("no lock on %q: %w", key, ErrNotFound)
	}
	for _, lk := range holders {
		n.audit().Info("force-release requested", principalField(ctx), httpapi.AuditCaller(ctx),
			zap.String("key", key), zap.Uint64("token", lk.Token), zap.String("owner", lk.Owner), zap.String("lock_principal", lk.Principal))
	}
	type outcome struct {
		released bool
		err      error
	}
	outs := make([]outcome, len(holders))
	var wg sync.WaitGroup
	for i, lk := range holders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := n.proposeRelease(ctx, lk)
			outs[i] = outcome{err == nil && res.Outcome == core.OutcomeReleased, err}
		}()
	}
	wg.Wait()
	released := 0
	var errs []error
	for i, o := range outs {
		if o.released {
			released++
			n.audit().Info("lock force-released", principalField(ctx), zap.String("key", key), zap.Uint64("token", holders[i].Token))
		}
		if o.err != nil {
			errs = append(errs, o.err)
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	if released == 0 {
		return fmt.Errorf("no lock on %q: %w", key, ErrNotFound)
	}
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

// lockInfo describes key's holders in this node's table: every holder in
// token order, the key's mode and limit, and, for an exclusive lock only
// (mode exclusive, limit 0), its one holder in the singular fields, as
// clients written before shared locks read them.
func (n *Node) lockInfo(key string) *ticketv1.GetLockResponse {
	holders := n.sm.Holders(key)
	if len(holders) == 0 {
		return &ticketv1.GetLockResponse{}
	}
	first := holders[0]
	out := &ticketv1.GetLockResponse{
		Held:    true,
		Holders: n.holdersToProto(holders),
		Mode:    ticketv1.Mode(first.Mode),
		Limit:   first.Limit,
	}
	if exclusiveLock(first) {
		h := out.Holders[0]
		out.Token, out.LeaseMs, out.RemainingMs, out.Owner = h.Token, h.LeaseMs, h.RemainingMs, h.Owner
	}
	return out
}

// exclusiveLock reports whether lk's key is an exclusive lock (mode
// exclusive, no semaphore limit): the one-holder case whose holder the
// singular API fields describe.
func exclusiveLock(lk core.Lock) bool { return lk.Mode == core.ModeExclusive && lk.Limit == 0 }

// holdersToProto is holders (one key's, in token order) on the wire.
func (n *Node) holdersToProto(holders []core.Lock) []*ticketv1.Holder {
	out := make([]*ticketv1.Holder, len(holders))
	for i, lk := range holders {
		out[i] = &ticketv1.Holder{
			Token: lk.Token, Owner: lk.Owner, LeaseMs: lk.LeaseMS, RemainingMs: n.remainingMS(lk), Session: lk.Session,
		}
	}
	return out
}

// remainingMS is the lease time left of lk in milliseconds by this node's
// own measure (every node tracks every lease from its own apply of the
// lock's last Grant or Renew; docs/design.md#leases), or of its session's
// lease for a holder under one (docs/design.md#sessions); -1 when this node
// does not track it.
func (n *Node) remainingMS(lk core.Lock) int64 {
	var d time.Duration
	var ok bool
	if lk.Session != 0 {
		d, ok = n.lessor.SessionRemaining(lk.Session)
	} else {
		d, ok = n.lessor.Remaining(lk.Key, lk.Token)
	}
	if !ok {
		return -1
	}
	return d.Milliseconds()
}

// ListLocks lists held keys whose key starts with prefix, in key order, a
// page at a time: one Lock per key with all its holders.
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

// listLocks returns up to size held keys of this node's table whose key
// starts with prefix and sorts after after (each with all its holders, like
// lockInfo), and the token of the next page.
func (n *Node) listLocks(prefix, after string, size int) *ticketv1.ListLocksResponse {
	locks, readIndex := n.rangeAt(prefix, after, size+1)
	out := &ticketv1.ListLocksResponse{ReadIndex: readIndex}
	for len(locks) > 0 {
		end := 1
		for end < len(locks) && locks[end].Key == locks[0].Key {
			end++
		}
		if len(out.Locks) == size {
			out.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(out.Locks[size-1].Key))
			break
		}
		holders, first := locks[:end], locks[0]
		m := &ticketv1.Lock{
			Key: first.Key, Holders: n.holdersToProto(holders), Mode: ticketv1.Mode(first.Mode), Limit: first.Limit,
		}
		if exclusiveLock(first) {
			h := m.Holders[0]
			m.Token, m.LeaseMs, m.RemainingMs, m.Owner = h.Token, h.LeaseMs, h.RemainingMs, h.Owner
		}
		out.Locks = append(out.Locks, m)
		locks = locks[end:]
	}
	return out
}

// CheckToken tells a downstream resource whether token still holds key
// (Chubby's CheckSequencer): linearizable, on the leader. Valid when token is
// one of key's current holders (any mode) that is not ending: a holder whose
// lease (or whose session's lease) ran out but whose Expire has not applied
// yet is already invalid. current_token is the newest (highest) holder's
// token, mode and limit the key's.
func (s *lockService) CheckToken(ctx context.Context, req *ticketv1.CheckTokenRequest) (*ticketv1.CheckTokenResponse, error) {
	n := s.n
	invalid := errors.Join(core.ValidateKey(req.GetKey()), core.ValidateToken(req.GetToken()))
	return onLeader(ctx, n, req, invalid, n.fwd.Lock, ticketv1connect.LockServiceClient.CheckToken,
		afterReadIndex(n, func() (*ticketv1.CheckTokenResponse, error) {
			holders := n.sm.Holders(req.GetKey())
			if len(holders) == 0 {
				return &ticketv1.CheckTokenResponse{}, nil
			}
			out := &ticketv1.CheckTokenResponse{
				CurrentToken: holders[len(holders)-1].Token,
				Mode:         ticketv1.Mode(holders[0].Mode),
				Limit:        holders[0].Limit,
			}
			for _, lk := range holders {
				if lk.Token == req.GetToken() {
					out.Valid = !n.ending(lk)
				}
			}
			return out, nil
		}))
}

// staleRead serves read from this node's table without asking the leader,
// unless the node is still replaying its log after a restart: its table is
// then older than the one it served before it stopped, and a stale read
// would go backwards (docs/design.md#reads). It then fails with ErrReplaying
// (Unavailable, retryable).
func staleRead[Res any](n *Node, read func() (*Res, error)) (*Res, error) {
	if st := n.raft.Status(); st.AppliedIndex < st.RecoveredCommitIndex {
		return nil, n.toConnect(fmt.Errorf("%w: applied index %d, recorded commit index %d", ErrReplaying, st.AppliedIndex, st.RecoveredCommitIndex))
	}
	return read()
}
