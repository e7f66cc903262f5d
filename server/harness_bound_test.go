package server

import (
	"time"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/applytime"
)

// This file checks I11, the lease bound through failovers and restarts
// (docs/design.md#leases): an unrenewed lock, and an abandoned session, ends
// (its Expire is decided) no later than max(its lease measured from the last
// acknowledged Grant/Renew/KeepAlive, the moment the node last took office)
// + one expiry round; a Renew (KeepAlive) that committed counts even if its
// client heard an error. In the harness elections take no fake time and an
// expiry round is decided as its timer fires, so the only slack is the
// apply-time record's bucket (applytime.Bucket): a restarted node measures a
// replayed lease from the end of the bucket in which it first applied it.

// boundCheck holds the acknowledged ends I11 measures from.
type boundCheck struct {
	locks    map[lockID]time.Time // acknowledgement time + lease, latest (never lowered)
	sessions map[uint64]time.Time // the same for sessions (CreateSession, KeepAlive)
	reported map[any]bool         // leases already reported, once each
}

func (b *boundCheck) init() {
	b.locks = map[lockID]time.Time{}
	b.sessions = map[uint64]time.Time{}
	b.reported = map[any]bool{}
}

// laterEnd raises m[id] to end unless it is later already.
func laterEnd[K comparable](m map[K]time.Time, id K, end time.Time) {
	if end.After(m[id]) {
		m[id] = end
	}
}

// answered records the end a client heard of at now: op's reply was
// delivered now. h.mu held.
func (b *boundCheck) answered(now time.Time, op *clientOp) {
	r := op.res.res
	switch {
	case op.kind == "acquire" && r.Session == 0:
		laterEnd(b.locks, lockID{op.id.key, r.Token}, now.Add(ms(r.LeaseMS)))
	case op.kind == "renew":
		laterEnd(b.locks, op.id, now.Add(ms(r.LeaseMS)))
	case op.kind == "create-session" || op.kind == "keepalive":
		id := r.Session
		if op.kind == "keepalive" {
			id = op.session
		}
		laterEnd(b.sessions, id, now.Add(ms(r.LeaseMS)))
	}
}

// applied records the lease an applied Grant, Renew, CreateSession or
// KeepAliveSession starts now (acknowledged or not: a Renew whose client
// heard an error but that committed renews the lease), and forgets the
// leases an applied entry ended. A restart's replay is not observed: the
// bound stays measured from the first apply. h.mu held.
func (b *boundCheck) applied(now time.Time, cmd core.Command, res core.Result) {
	end := now.Add(ms(res.LeaseMS))
	switch {
	case cmd.Op == core.OpGrant && res.Outcome == core.OutcomeGranted && res.Session == 0:
		laterEnd(b.locks, lockID{cmd.Key, res.Token}, end)
	case cmd.Op == core.OpRenew && res.Outcome == core.OutcomeRenewed:
		laterEnd(b.locks, lockID{cmd.Key, cmd.Token}, end)
	case cmd.Op == core.OpCreateSession && res.Outcome == core.OutcomeSessionCreated,
		cmd.Op == core.OpKeepAliveSession && res.Outcome == core.OutcomeRenewed:
		laterEnd(b.sessions, res.Session, end)
	case cmd.Op == core.OpRelease || (cmd.Op == core.OpExpire && res.Existed):
		delete(b.locks, lockID{cmd.Key, cmd.Token})
	}
	if res.Ended != nil {
		delete(b.sessions, res.Session)
	}
}

// checkBound checks I11 once a tick has settled: while the node is the
// promoted leader, every lock and session with an acknowledged end whose
// bound has passed is expiring (its Expire decided). h.mu held.
func (h *harness) checkBound() {
	if !h.n.lessor.Primary() || !h.n.stillLeader(h.mem.Status().Term) {
		return
	}
	now := h.clock.Now()
	b := &h.check.bound
	overBound := func(end time.Time) (time.Duration, bool) {
		bound := end
		if h.officeAt.After(bound) {
			bound = h.officeAt
		}
		bound = bound.Add(applytime.Bucket)
		return now.Sub(bound), now.After(bound)
	}
	h.n.sm.Ascend(func(lk core.Lock) bool {
		id := lockID{lk.Key, lk.Token}
		end, ok := b.locks[id]
		if !ok || lk.Session != 0 || b.reported[id] || h.n.lessor.Expiring(lk.Key, lk.Token) {
			return true
		}
		if late, over := overBound(end); over {
			b.reported[id] = true
			h.check.violate("I11", "%s/%d outlived its bound by %s: acknowledged lease ended at %s, office taken at %s, and no Expire is decided",
				lk.Key, lk.Token, late, end.Sub(h.start), h.officeAt.Sub(h.start))
		}
		return true
	})
	h.n.sm.AscendSessions(func(s core.Session) bool {
		end, ok := b.sessions[s.ID]
		if !ok || b.reported[s.ID] || h.n.lessor.SessionExpiring(s.ID) {
			return true
		}
		if late, over := overBound(end); over {
			b.reported[s.ID] = true
			h.check.violate("I11", "session %d outlived its bound by %s: acknowledged TTL ended at %s, office taken at %s, and no ExpireSession is decided",
				s.ID, late, end.Sub(h.start), h.officeAt.Sub(h.start))
		}
		return true
	})
}
