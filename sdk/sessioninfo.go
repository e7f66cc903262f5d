package sdk

import (
	"context"
	"fmt"
	"time"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// SessionInfo describes an open session, as GetSession and ListSessions
// report it (etcd LeaseTimeToLive, Consul session info).
type SessionInfo struct {
	// ID is the session's id.
	ID uint64
	// TTL is the session's lease, restarted by every KeepAlive.
	TTL time.Duration
	// Remaining is the lease time left by the answering node's clock;
	// negative when that node does not know it.
	Remaining time.Duration
	// Principal is the identity that opened the session ("" with
	// authorization off).
	Principal string
	// Locks are the holders under the session, in key and token order.
	Locks []SessionLock
}

// SessionLock is one lock held under a session.
type SessionLock struct {
	// Key is the lock's key.
	Key string
	// Token is the holder's fencing token.
	Token uint64
	// Owner is the owner id of the holder's Acquire.
	Owner string
	// Mode is how the key is held.
	Mode Mode
	// Limit is the key's semaphore slot count, 0 for a lock.
	Limit uint32
}

// SessionFilter selects the sessions ListSessions returns; the zero value
// selects every session the caller may see.
type SessionFilter struct {
	// Principal keeps only the sessions this principal opened.
	Principal string
	// KeyPrefix keeps only the sessions holding at least one lock whose key
	// starts with it.
	KeyPrefix string
}

// GetSession describes session id: its TTL, remaining lease, principal and
// locks. The answer is linearizable. A principal sees its own sessions, an
// admin every session.
//
// Errors: ErrSessionNotFound (unknown, ended, or another principal's),
// ErrInvalidArgument (id 0), or the ctx error wrapping the last failure.
func (c *Client) GetSession(ctx context.Context, id uint64) (SessionInfo, error) {
	req := &ticketv1.GetSessionRequest{Session: id}
	spec := callSpec{op: "get session", key: fmt.Sprint(id), toLeader: true, timeout: c.cfg.requestTimeout}
	res, _, err := invoke(ctx, c, spec, func(ctx context.Context, n *node) (*ticketv1.GetSessionResponse, error) {
		return n.lock.GetSession(ctx, req)
	})
	if err != nil {
		return SessionInfo{}, err
	}
	return sessionInfoOf(res.GetSession()), nil
}

// ListSessions returns every open session that f selects and the caller
// may see (a principal its own, an admin all), in ascending id order,
// fetching as many pages as needed. It is linearizable per page; sessions
// may change between pages.
//
// Errors: ErrInvalidArgument, or the ctx error wrapping the last failure.
func (c *Client) ListSessions(ctx context.Context, f SessionFilter) ([]SessionInfo, error) {
	var (
		out  []SessionInfo
		page string
	)
	for {
		req := &ticketv1.ListSessionsRequest{Principal: f.Principal, KeyPrefix: f.KeyPrefix, PageSize: listPageSize, PageToken: page}
		spec := callSpec{op: "list sessions", key: f.KeyPrefix, toLeader: true, timeout: c.cfg.requestTimeout}
		res, _, err := invoke(ctx, c, spec, func(ctx context.Context, n *node) (*ticketv1.ListSessionsResponse, error) {
			return n.lock.ListSessions(ctx, req)
		})
		if err != nil {
			return nil, err
		}
		for _, s := range res.GetSessions() {
			out = append(out, sessionInfoOf(s))
		}
		if page = res.GetNextPageToken(); page == "" {
			return out, nil
		}
	}
}

// sessionInfoOf converts the API's SessionInfo.
func sessionInfoOf(s *ticketv1.SessionInfo) SessionInfo {
	out := SessionInfo{ID: s.GetSession(), TTL: ms(s.GetTtlMs()), Remaining: ms(s.GetRemainingMs()), Principal: s.GetPrincipal()}
	for _, l := range s.GetLocks() {
		out.Locks = append(out.Locks, SessionLock{Key: l.GetKey(), Token: l.GetToken(), Owner: l.GetOwner(), Mode: modeOf(l.GetMode()), Limit: l.GetLimit()})
	}
	return out
}
