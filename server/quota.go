package server

import (
	"sync"

	"github.com/ticketd/ticketd/server/security"
)

// This file is the per-principal quotas of the policy file on a node
// (docs/security.md#quotas): locks and sessions counted cluster-wide, from
// the replicated table (core.StateMachine PrincipalLocks and
// PrincipalSessions) plus what this leader has in flight, so that
// concurrent requests cannot overshoot a quota (as limits.max_sessions is
// kept in sessioncount.go); watchers and waiters counted on this node by the
// watch hub and the wait queue, which ask quotaAdmit. Past its quota a
// principal gets a *security.QuotaError (ResourceExhausted); every other
// principal is served as before. The policy is read at every check, so a
// reload (SIGHUP) changes the quotas of the next requests.

// quotaOf returns principal's limit of kind under the current policy and
// the policy key it comes from; 0 (no per-principal limit) with
// authorization off, where every request has the principal "".
func (n *Node) quotaOf(principal string, kind security.QuotaKind) (int, string) {
	if principal == "" {
		return 0, ""
	}
	return n.authn().Quota(principal).Limit(kind)
}

// quotaRefusal counts a refusal of kind in the metrics and returns the
// error the client gets.
func (n *Node) quotaRefusal(principal string, kind security.QuotaKind, limit int, key string) error {
	n.met.quotaRefused(kind, principal)
	return &security.QuotaError{Principal: principal, Kind: kind, Limit: limit, Key: key}
}

// quotaAdmit returns the Admit function of a watch (watch.Request) or a
// waiter (waitq.Request) of principal: it refuses once the principal has
// its quota of kind open on this node. Nil when there is no quota.
func (n *Node) quotaAdmit(principal string, kind security.QuotaKind) func(open int) error {
	limit, key := n.quotaOf(principal, kind)
	if limit <= 0 {
		return nil
	}
	return func(open int) error {
		if open >= limit {
			return n.quotaRefusal(principal, kind, limit, key)
		}
		return nil
	}
}

// grantsInFlight counts, per principal, the Grant proposals this leader has
// admitted against the principal's lock quota and whose proposal has not
// returned yet. A proposal returns once its entry applied here (or
// failed), so a principal's locks are its holders in the table plus these,
// never counted twice. The zero value is ready; safe for concurrent use.
type grantsInFlight struct {
	mu sync.Mutex
	by map[string]int // principal → grants in flight; no zero entries
}

// lockQuota returns principal's lock quota and its policy key, or 0 when
// r by holder id (holderID) needs none: no quota, or an idempotent retry
// of a holder of r.key, which returns that holder and adds no lock.
func (n *Node) lockQuota(principal string, r acquireRequest, id string) (int, string) {
	limit, key := n.quotaOf(principal, security.QuotaLocks)
	if limit <= 0 || n.isHolder(r.key, id) {
		return 0, ""
	}
	return limit, key
}

// checkLockQuota refuses r, before it queues, when its principal already
// holds or is being granted its quota of locks: a request that could only
// be refused at its turn does not wait for it. It reserves nothing
// (reserveLockGrant does, at the turn). Errors: *security.QuotaError.
func (n *Node) checkLockQuota(principal string, r acquireRequest, id string) error {
	_, err := n.lockQuotaSlot(principal, r, id, false)
	return err
}

// reserveLockGrant admits the Grant of r, about to be proposed with its
// turn, against its principal's lock quota: the principal's holders in the
// table plus its grants in flight on this leader, this one included, must
// stay within the quota. When admitted the grant counts as in flight until
// the returned done is called (once, when its proposal has returned: it
// applied or failed). done is nil when r needs no quota. Errors:
// *security.QuotaError.
func (n *Node) reserveLockGrant(principal string, r acquireRequest, id string) (done func(), err error) {
	return n.lockQuotaSlot(principal, r, id, true)
}

// lockQuotaSlot checks r against its principal's lock quota and, if
// reserve, counts it as a grant in flight (see reserveLockGrant).
func (n *Node) lockQuotaSlot(principal string, r acquireRequest, id string, reserve bool) (done func(), err error) {
	limit, key := n.lockQuota(principal, r, id)
	if limit <= 0 {
		return nil, nil
	}
	g := &n.lead.lockGrants
	g.mu.Lock()
	defer g.mu.Unlock()
	if n.sm.PrincipalLocks(principal)+g.by[principal] >= limit {
		return nil, n.quotaRefusal(principal, security.QuotaLocks, limit, key)
	}
	if !reserve {
		return nil, nil
	}
	if g.by == nil {
		g.by = map[string]int{}
	}
	g.by[principal]++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.by[principal]--; g.by[principal] <= 0 {
			delete(g.by, principal)
		}
	}, nil
}
