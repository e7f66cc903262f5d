package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
)

// This file is the session reads, GetSession and ListSessions (etcd
// LeaseTimeToLive and LeaseLeases, Consul session info and list):
// linearizable like GetLock (a ReadIndex on the promoted leader; followers
// forward). A principal sees the sessions it opened, an admin every session,
// and with authorization off every caller sees every session; another
// principal's session is answered exactly as an unknown one, so the reads
// reveal nothing of other principals' sessions.

// GetSession describes session req.session: TTL, remaining lease, principal
// and the locks held under it. Errors: InvalidArgument (session 0),
// NotFound (unknown, ended, or another principal's session), Unavailable.
func (s *lockService) GetSession(ctx context.Context, req *ticketv1.GetSessionRequest) (*ticketv1.GetSessionResponse, error) {
	n := s.n
	return onLeader(ctx, n, req, core.ValidateSession(req.GetSession()), n.fwd.Lock, ticketv1connect.LockServiceClient.GetSession,
		afterReadIndex(n, func() (*ticketv1.GetSessionResponse, error) {
			sess, ok := n.sm.Session(req.GetSession())
			if !ok || !n.authn().MayActFor(ctx, sess.Principal, true) {
				return nil, &SessionNotFoundError{Session: req.GetSession()}
			}
			return &ticketv1.GetSessionResponse{Session: n.sessionInfo(sess, n.sm.SessionLocks(sess.ID))}, nil
		}))
}

// ListSessions lists the open sessions the caller may see, in ascending id
// order, a page at a time, optionally only those of req.principal and those
// holding a lock whose key starts with req.key_prefix. Errors:
// InvalidArgument (negative page_size, malformed page_token, key_prefix
// longer than a key), Unavailable.
func (s *lockService) ListSessions(ctx context.Context, req *ticketv1.ListSessionsRequest) (*ticketv1.ListSessionsResponse, error) {
	n := s.n
	size, after, invalid := sessionPage(req)
	return onLeader(ctx, n, req, invalid, n.fwd.Lock, ticketv1connect.LockServiceClient.ListSessions,
		afterReadIndex(n, func() (*ticketv1.ListSessionsResponse, error) {
			return n.listSessions(ctx, req, after, size), nil
		}))
}

// sessionPage checks a ListSessions request and returns its page size (the
// ListLocks default and bound) and the session id the page starts after
// (page_token, a decimal id).
func sessionPage(req *ticketv1.ListSessionsRequest) (size int, after uint64, err error) {
	size = int(req.GetPageSize())
	switch {
	case size < 0:
		return 0, 0, fmt.Errorf("%w: page_size %d is negative", core.ErrInvalidArgument, size)
	case size == 0:
		size = defaultPageSize
	case size > maxPageSize:
		size = maxPageSize
	}
	if len(req.GetKeyPrefix()) > core.MaxKeyBytes {
		return 0, 0, fmt.Errorf("%w: key_prefix is longer than %d bytes", core.ErrInvalidArgument, core.MaxKeyBytes)
	}
	if tok := req.GetPageToken(); tok != "" {
		if after, err = strconv.ParseUint(tok, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("%w: malformed page_token", core.ErrInvalidArgument)
		}
	}
	return size, after, nil
}

// listSessions returns up to size sessions after id after that the caller
// of ctx may see and req's filters keep, and the token of the next page.
// The sessions are copied out of the table first (AscendSessions holds its
// read lock, under which the table must not be read again), then filtered
// by the keys they hold.
func (n *Node) listSessions(ctx context.Context, req *ticketv1.ListSessionsRequest, after uint64, size int) *ticketv1.ListSessionsResponse {
	out := &ticketv1.ListSessionsResponse{ReadIndex: n.sm.AppliedIndex()}
	a, prefix := n.authn(), req.GetKeyPrefix()
	var candidates []core.Session
	n.sm.AscendSessions(func(sess core.Session) bool {
		if sess.ID <= after || (req.GetPrincipal() != "" && sess.Principal != req.GetPrincipal()) || !a.MayActFor(ctx, sess.Principal, true) {
			return true
		}
		candidates = append(candidates, sess)
		// Without a key filter every candidate is kept: one past the page
		// tells whether another page follows.
		return prefix != "" || len(candidates) <= size
	})
	for _, sess := range candidates {
		locks := n.sm.SessionLocks(sess.ID)
		if prefix != "" && !holdsUnder(locks, prefix) {
			continue
		}
		if len(out.Sessions) == size {
			out.NextPageToken = strconv.FormatUint(out.Sessions[size-1].GetSession(), 10)
			break
		}
		out.Sessions = append(out.Sessions, n.sessionInfo(sess, locks))
	}
	return out
}

// holdsUnder reports whether a lock of locks has a key starting with prefix.
func holdsUnder(locks []core.Lock, prefix string) bool {
	for _, lk := range locks {
		if strings.HasPrefix(lk.Key, prefix) {
			return true
		}
	}
	return false
}

// sessionInfo is sess with the locks held under it on the wire; its
// remaining lease is this node's lessor's (-1 when it does not track it).
func (n *Node) sessionInfo(sess core.Session, locks []core.Lock) *ticketv1.SessionInfo {
	out := &ticketv1.SessionInfo{Session: sess.ID, TtlMs: sess.TTLMS, RemainingMs: -1, Principal: sess.Principal}
	if d, ok := n.lessor.SessionRemaining(sess.ID); ok {
		out.RemainingMs = d.Milliseconds()
	}
	for _, lk := range locks {
		out.Locks = append(out.Locks, &ticketv1.SessionLock{
			Key: lk.Key, Token: lk.Token, Owner: lk.Owner, Mode: ticketv1.Mode(lk.Mode), Limit: lk.Limit,
		})
	}
	return out
}
