package server

import (
	"fmt"
	"sync"

	"github.com/ticketd/ticketd/server/security"
)

// This file is the session caps on the leader (docs/security.md#quotas):
// limits.max_sessions for the whole cluster and
// limits.max_sessions_per_principal for each principal, so that one
// principal cannot open every session there is and lock the others out.
// Open sessions are counted in the replicated table (core.StateMachine
// SessionLen and PrincipalSessions); creates in flight are counted here,
// on the leader, so that concurrent creates cannot overshoot either cap.

// createsInFlight counts the CreateSession proposals in flight on this
// leader, in total and per principal. The zero value is ready to use; it is
// safe for concurrent use.
type createsInFlight struct {
	mu    sync.Mutex
	total int
	by    map[string]int // principal → creates in flight; no zero entries
}

// admitSessionCreate decides whether a CreateSession by principal
// ("" with authorization off) may be proposed now: the open sessions plus
// the creates in flight, this one included, must stay within
// limits.max_sessions and, with authorization on, within
// limits.max_sessions_per_principal and the policy's sessions quota
// (quota.go) for principal (0 disables a cap). When
// admitted, the create counts as in flight until the returned done is
// called (once, after the proposal returned: it has applied or failed).
//
// Errors: ErrTooManySessions, naming the cap that was reached, or a
// *security.QuotaError.
func (n *Node) admitSessionCreate(principal string) (done func(), err error) {
	total := n.cfg.Limits.MaxSessions
	per := n.cfg.Limits.MaxSessionsPerPrincipal
	if !n.authn().Enabled() {
		per = 0 // every client is the one anonymous principal: max_sessions is its cap
	}
	c := &n.lead.sessionCreates
	c.mu.Lock()
	defer c.mu.Unlock()
	if total > 0 && n.sm.SessionLen()+c.total >= total {
		return nil, fmt.Errorf("%w: the cluster reached its cap of %d (limits.max_sessions)", ErrTooManySessions, total)
	}
	if per > 0 && n.sm.PrincipalSessions(principal)+c.by[principal] >= per {
		return nil, fmt.Errorf("%w: principal %q reached its cap of %d (limits.max_sessions_per_principal)",
			ErrTooManySessions, principal, per)
	}
	if q, key := n.quotaOf(principal, security.QuotaSessions); q > 0 && n.sm.PrincipalSessions(principal)+c.by[principal] >= q {
		return nil, n.quotaRefusal(principal, security.QuotaSessions, q, key)
	}
	if c.by == nil {
		c.by = map[string]int{}
	}
	c.total++
	c.by[principal]++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.total--
		if c.by[principal]--; c.by[principal] <= 0 {
			delete(c.by, principal)
		}
	}, nil
}
