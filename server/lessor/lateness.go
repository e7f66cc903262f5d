package lessor

import "time"

// This file measures how late the leader ends a lease by its own measure
// (docs/design.md#leases): the bound an unrenewed lease obeys allows one
// expiry round (a quorum confirmation and an Expire commit) past the moment
// the leader may expire it. A leader starved of CPU, on a slow disk or
// losing contact with its quorum takes longer; the lateness says how much
// longer, apart from how the lease was measured, so that a lease ended late
// by a late round is told apart from a lease measured late.

// Due is when the expiry of one lease became due on this leader.
type Due struct {
	// At is the lease's deadline on this node (measured from its own
	// apply, an earlier run's, or a voter's report: Lower), or Office if
	// that came later: no expiry is decided before the node leads.
	At time.Time
	// Office is when this node took office as leader: the Promote of the
	// current epoch, after its barrier applied (zero when not primary).
	Office time.Time
}

// ExpiryDue returns when the expiry of the lock (key, token), timed on its
// own, became due on this leader, and true; false when it is not tracked
// (a holder under a session is expired with its session: SessionExpiryDue).
// Call it before proposing the lock's Expire: once that applies, the lock
// is no longer tracked.
func (l *Lessor) ExpiryDue(key string, token uint64) (Due, bool) {
	return l.expiryDue(lockLease(key, token))
}

// SessionExpiryDue is ExpiryDue for the lease of session id.
func (l *Lessor) SessionExpiryDue(id uint64) (Due, bool) {
	return l.expiryDue(sessionLease(id))
}

// expiryDue is ExpiryDue of lease id.
func (l *Lessor) expiryDue(id leaseID) (Due, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	it, ok := l.items.get(id)
	if !ok {
		return Due{}, false
	}
	d := Due{At: l.at(it.deadline)}
	if l.primary {
		d.Office = l.office
		if l.office.After(d.At) {
			d.At = l.office
		}
	}
	return d, true
}

// Late returns how long ago, on the lessor's clock, d became due: called
// once the lease's Expire has applied, the lateness of that expiry. 0 for
// the zero Due (a lease that was not tracked) and never negative.
func (l *Lessor) Late(d Due) time.Duration {
	if d.At.IsZero() {
		return 0
	}
	return max(l.cfg.Clock.Now().Sub(d.At), 0)
}
