package lessor

import (
	"container/heap"
	"time"

	"github.com/ticketd/ticketd/core"
)

// This file brings the lessor in line with a table that changed without
// applies it saw: a snapshot restored into it (docs/design.md#leases). Into
// a lessor that tracks nothing — a fresh process restoring its snapshot at
// start, or a node whose first state is a snapshot from the leader — it is
// a direct load (load): one pass over the table builds every lease, the
// deadline heap in one heap.Init and the session holders, with nothing to
// compare. Into a lessor that already tracks leases (a follower that
// lagged behind a compaction and installs the leader's snapshot) it is a
// diff (diff), which keeps the deadline of every lease the node measured
// from the same Grant/Renew. Both end in the same state.

// Reconcile makes the tracked leases and lock-delays match table after this
// node's table changed without an apply it saw: a snapshot restored (at
// start, or sent by the leader), or entries applied before the hook was
// installed. A lock tracked with its token and a seen index at or above its
// ModIndex keeps its deadline; any other held lock starts at now + lease_ms
// (later than any client's deadline, so safe); tracked locks the table does
// not hold are forgotten. A lease an earlier run of this node applied
// (Config.AppliedAt) starts when that run applied it instead. Sessions are
// reconciled the same way (by their ModIndex and TTL), and holders under a
// session are attached to it. Delays the table records but this node does
// not time start now. O(locks + sessions); into a lessor that tracks
// nothing it is a direct load (Loads), with no comparison. Call it from the
// apply goroutine, after a restore only (Resync decides).
func (l *Lessor) Reconcile(table Table) {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reconcile(table, now)
}

// Resync reconciles with table (Reconcile) only if a snapshot was restored
// into it since the last reconcile (table.Restores moved), and reports
// whether it did. It is the apply hook's check that the table was not
// replaced behind its back: O(1) otherwise, whatever gaps the applied
// indexes have (a leader's no-op, an empty entry of a new term, a
// configuration change never reach the apply hook; docs/design.md#replicated-commands).
func (l *Lessor) Resync(table Table) bool {
	if table.Restores() == l.restores.Load() {
		return false // the common case: no lock taken
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if table.Restores() == l.restores.Load() {
		return false
	}
	l.reconcile(table, l.cfg.Clock.Now())
	return true
}

// Reconciles returns how many full reconciles with the table (Reconcile, or
// Resync and Promote after a restore) this lessor has done: each one reads
// every lock, session and lock-delay of the table.
func (l *Lessor) Reconciles() uint64 { return l.reconciles.Load() }

// Loads returns how many of the Reconciles were direct loads into a lessor
// that tracked nothing (no lease, holder under a session or lock-delay):
// a restart's restore of its snapshot, or a first snapshot from the leader.
// The others compared the table with what the lessor tracked.
func (l *Lessor) Loads() uint64 { return l.loads.Load() }

// reconcile is Reconcile with l.mu held: a load when the lessor tracks
// nothing, else a diff.
func (l *Lessor) reconcile(table Table, now time.Time) {
	l.reconciles.Add(1)
	l.restores.Store(table.Restores()) // read first: a later restore is noticed next time
	if l.items.len() == 0 && len(l.under) == 0 && len(l.delays) == 0 {
		l.loads.Add(1)
		l.load(table, now)
	} else {
		l.diff(table, now)
	}
	l.kick()
}

// load builds the lessor's leases, session holders and lock-delays from
// table in one pass, for a lessor that tracks none (so the deadline heap,
// the marks and the delay heap are empty too); l.mu held. Every lease is
// new, so each is measured as Reconcile measures a lease it did not track:
// from now, or from an earlier run's apply of its ModIndex (start). The
// deadline heap is built once (heap.Init, O(n)) rather than by n pushes, and
// the lease map at its final size.
func (l *Lessor) load(table Table, now time.Time) {
	applied := table.AppliedIndex()
	delays := readDelays(table)
	var leases deadlineHeap
	table.Ascend(func(lk core.Lock) bool {
		delays.holder(lk.Key)
		if lk.Session != 0 {
			l.attach(lockID{lk.Key, lk.Token}, lk.Session)
			return true
		}
		leases = append(leases, l.newLease(lockLease(lk.Key, lk.Token), lk.LeaseMS, seenIndex(lk.ModIndex, applied), now))
		return true
	})
	sessions := 0
	table.AscendSessions(func(s core.Session) bool {
		leases = append(leases, l.newLease(sessionLease(s.ID), s.TTLMS, seenIndex(s.ModIndex, applied), now))
		sessions++
		return true
	})
	l.items = newLeaseMap(len(leases)-sessions, sessions)
	for i, it := range leases {
		it.index = int32(i)
		l.items.put(it)
	}
	l.sessions = sessions
	l.due = leases
	heap.Init(&l.due)
	delays.start(l, now)
}

// newLease returns the item of a lease the lessor did not track, last
// granted or renewed at log index seen, measured from this node's first
// apply of seen (start); not in the heap yet.
func (l *Lessor) newLease(id leaseID, leaseMS int64, seen uint64, now time.Time) *item {
	deadline := l.mono(l.start(seen, now).Add(ms(leaseMS)))
	return &item{id: id, leaseMS: leaseMS, deadline: deadline, due: deadline, seen: seen, index: -1}
}

// diff makes what the lessor tracks match table, keeping the deadline of
// every lease tracked with a seen index at or above the table's ModIndex of
// it; l.mu held.
func (l *Lessor) diff(table Table, now time.Time) {
	applied := table.AppliedIndex()
	delays := readDelays(table)
	held := make(map[leaseID]bool, l.items.len())
	attached := make(map[lockID]bool, len(l.under))
	keep := func(id leaseID, leaseMS int64, modIndex uint64) {
		held[id] = true
		if it, ok := l.items.get(id); ok && it.seen >= modIndex {
			return
		}
		seen := seenIndex(modIndex, applied)
		l.track(id, leaseMS, seen, l.start(seen, now).Add(ms(leaseMS)))
	}
	table.Ascend(func(lk core.Lock) bool {
		delays.holder(lk.Key)
		if lk.Session != 0 {
			attached[lockID{lk.Key, lk.Token}] = true
			l.attach(lockID{lk.Key, lk.Token}, lk.Session)
			return true
		}
		keep(lockLease(lk.Key, lk.Token), lk.LeaseMS, lk.ModIndex)
		return true
	})
	table.AscendSessions(func(s core.Session) bool {
		keep(sessionLease(s.ID), s.TTLMS, s.ModIndex)
		return true
	})
	for id, it := range l.items.all() {
		if !held[id] {
			l.remove(it)
		}
	}
	for h := range l.under {
		if !attached[h] {
			l.detach(h)
		}
	}
	delays.start(l, now)
}

// seenIndex is the seen index of a lease whose last Grant/Renew
// (CreateSession/KeepAliveSession) the table records at modIndex: that
// index, or for a version 1 snapshot (no ModIndex) the table's applied
// index, since the lease is unchanged since then.
func seenIndex(modIndex, applied uint64) uint64 {
	if modIndex == 0 {
		return applied
	}
	return modIndex
}

// tableDelays are the lock-delay records of a table, in key order, read
// before its holders; onHeld marks those on a key that has a holder.
type tableDelays struct {
	recs   []core.LockDelay
	onHeld []bool
	next   int // the first record whose key is not below the last key held
}

// readDelays reads table's lock-delay records.
func readDelays(table Table) *tableDelays {
	d := &tableDelays{}
	table.AscendLockDelays(func(rec core.LockDelay) bool {
		d.recs = append(d.recs, rec)
		return true
	})
	d.onHeld = make([]bool, len(d.recs))
	return d
}

// holder records that key has a holder. Keys must come in ascending order
// (core.StateMachine.Ascend), as the records do: a merge of the two, with
// no set of held keys.
func (d *tableDelays) holder(key string) {
	for d.next < len(d.recs) && d.recs[d.next].Key < key {
		d.next++
	}
	if d.next < len(d.recs) && d.recs[d.next].Key == key {
		d.onHeld[d.next] = true
	}
}

// start times, from now, each record on a key that has no holder and whose
// key the lessor does not time a delay for already; l.mu held.
func (d *tableDelays) start(l *Lessor, now time.Time) {
	for i, rec := range d.recs {
		if _, ok := l.delays[rec.Key]; !ok && !d.onHeld[i] {
			l.setDelay(rec.Key, now.Add(ms(rec.LockDelayMS)))
		}
	}
}
