package lessor

import (
	"time"

	"github.com/ticketd/ticketd/core"
)

// This file is the quorum minimum of lease deadlines (docs/design.md#leases):
// every node reports the time each lease it times has left (Reports, on the
// voters), and a newly promoted leader lowers its own deadlines to those
// reports (Lower). A node's deadline is measured from its own apply of the
// lease's last Grant/Renew (CreateSession/KeepAliveSession), which came
// after the client sent it, so each report is at or after the client's
// deadline, and so is the minimum of any set of them: lowering to it is
// never early. A leader that measured a lease from a late apply (it had not
// applied the entry when it stopped, first received it after the
// acknowledgement, or lost its apply-time record in a host reboot) gets back
// the deadline of any voter that applied the entry in time.

// Report is one lease's time left on the node that sent it: a lock holder
// timed on its own (Key and Token; Session 0) or a session (Session; Key ""
// and Token 0).
type Report struct {
	Key     string
	Token   uint64
	Session uint64
	// Seen is the log index of the lease's last Grant or Renew
	// (CreateSession or KeepAliveSession) that node applied. A report counts
	// only where the receiver measures from the same index: after a later
	// renewal, an older measure says nothing.
	Seen uint64
	// Remaining is the time left on that node's clock when the report was
	// made; 0 once its deadline passed. Never negative in a valid report.
	Remaining time.Duration
}

// LockReports appends to out a report for every holder of locks that this
// node times on its own (holders under a session are answered by their
// session's report; untracked ones are skipped) and returns it. Remaining is
// rounded up to the next millisecond, the unit reports travel in, so that
// the receiver's deadline is never earlier than this node's. One lessor lock
// per call: call it with a page of the table (core.StateMachine.Range).
func (l *Lessor) LockReports(locks []core.Lock, out []Report) []Report {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, lk := range locks {
		if it, ok := l.items.get(lockLease(lk.Key, lk.Token)); ok {
			out = append(out, report(it, l.mono(now)))
		}
	}
	return out
}

// SessionReports appends to out a report for every session of sessions
// that this node times, as LockReports does for locks, and returns it.
func (l *Lessor) SessionReports(sessions []core.Session, out []Report) []Report {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range sessions {
		if it, ok := l.items.get(sessionLease(s.ID)); ok {
			out = append(out, report(it, l.mono(now)))
		}
	}
	return out
}

// report is it's Report at now, rounded up to whole milliseconds; l.mu held.
func report(it *item, now mono) Report {
	left := max(time.Duration(it.deadline-now), 0)
	if r := left % time.Millisecond; r != 0 {
		left += time.Millisecond - r
	}
	return Report{Key: it.id.key, Token: it.id.lockToken(), Session: it.id.session(), Seen: it.seen, Remaining: left}
}

// LowerResult counts what Lower did with a batch of reports.
type LowerResult struct {
	// Lowered: reports that moved a deadline earlier.
	Lowered int
	// Kept: reports of a tracked lease with the same seen index that would
	// not have moved its deadline earlier (a later or equal measure), or of
	// a lease already marked expiring.
	Kept int
	// Stale: reports of a lease this node does not track, or tracks from
	// another seen index (renewed since, or not applied here yet).
	Stale int
	// Invalid: malformed reports (negative Remaining, Remaining longer than
	// the lease, both or neither of Key and Session), ignored.
	Invalid int
	// Discarded: the whole batch was ignored because this lessor is no
	// longer primary in term.
	Discarded bool
}

// Add adds the counts of o to r (Discarded is left as it is).
func (r *LowerResult) Add(o LowerResult) {
	r.Lowered += o.Lowered
	r.Kept += o.Kept
	r.Stale += o.Stale
	r.Invalid += o.Invalid
}

// Lower is the leader's half of the quorum minimum: while this lessor is
// primary in term (Promote), it sets the deadline of every lease that a
// report names, and that it tracks with the report's seen index, to
// min(its deadline, now + Remaining), now read after the reports arrived,
// so after their sender made them. It only ever moves a deadline earlier,
// never later; a lease marked expiring is left alone (its deadline has
// passed already). Reports of another seen index are ignored (a later
// Renew made them irrelevant; an earlier one, not yet applied here, is not
// this node's to judge), and so are malformed ones (LowerResult.Invalid):
// a peer's bad input changes nothing, and a valid report never makes a
// lease end before the time its sender reported. A batch that arrives after
// a demotion, or after a promotion in a later term, is discarded.
func (l *Lessor) Lower(term uint64, reports []Report) LowerResult {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var res LowerResult
	if l.closed || !l.primary || l.term != term {
		res.Discarded = true
		return res
	}
	for _, r := range reports {
		if r.Remaining < 0 || (r.Key == "") == (r.Session == 0) || (r.Session != 0 && r.Token != 0) {
			res.Invalid++
			continue
		}
		id := lockLease(r.Key, r.Token)
		if r.Session != 0 {
			id = sessionLease(r.Session)
		}
		it, ok := l.items.get(id)
		switch {
		case !ok || it.seen != r.Seen:
			res.Stale++
			continue
		case r.Remaining > ms(it.leaseMS):
			res.Invalid++ // no node measures more than the lease from its apply
			continue
		}
		deadline := l.mono(now.Add(r.Remaining))
		if it.expiring || deadline >= it.deadline {
			res.Kept++
			continue
		}
		it.deadline, it.due = deadline, deadline
		l.enqueue(it)
		res.Lowered++
	}
	if res.Lowered > 0 {
		l.kick()
	}
	return res
}
