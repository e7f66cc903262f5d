package watch

import "github.com/ticketd/ticketd/core"

// Type is the kind of change an Event reports.
type Type uint8

// The event types; the numbers match ticket.v1.WatchEvent.Type.
const (
	// TypeUnspecified is no event (never sent).
	TypeUnspecified Type = iota
	// Granted: a lock was created (or, in an include_existing snapshot, is held).
	Granted
	// Released: the holder released the lock.
	Released
	// Expired: the lease ran out and the leader's Expire removed the lock.
	Expired
	// Renewed: the lease was restarted (a Renew, or an idempotent retry Grant).
	Renewed
)

// String returns the wire name of t.
func (t Type) String() string {
	switch t {
	case Granted:
		return "GRANTED"
	case Released:
		return "RELEASED"
	case Expired:
		return "EXPIRED"
	case Renewed:
		return "RENEWED"
	}
	return "UNSPECIFIED"
}

// Event is one change to the lock table, as applied at Index: one holder
// granted, renewed, released or expired. Owner is set on Granted events only
// (a Release or Expire command does not carry it); LeaseMS on Granted and
// Renewed, in milliseconds. A plain value.
type Event struct {
	Type    Type
	Key     string
	Token   uint64
	Owner   string
	LeaseMS int64
	// Mode and Limit are the key's: set on Granted events, and on
	// Released and Expired events of a shared key or a semaphore; zero for a
	// plain exclusive lock.
	Mode  core.Mode
	Limit uint32
	// Session is the session the holder is under (0: none): set on Granted
	// events and on the events of a session's end.
	Session uint64
	// Index is the Raft log index of the entry that applied the change.
	Index uint64
}

// eventOverhead approximates an Event's fixed size in bytes, for the
// history's byte bound.
const eventOverhead = 64

// size is e's approximate memory footprint in bytes.
func (e Event) size() int64 { return eventOverhead + int64(len(e.Key)+len(e.Owner)) }

// EventOf returns the event of an applied entry that changed one holder, and
// false when the entry changed no lock (a no-op, a rejected grant, a release
// of a lock not held, a late expiry, a member update, a session's creation or
// keep-alive) or changed several (a session's end, a RenewBatch: see
// AppendEvents).
// Deterministic: every node derives the same event from the same entry.
func EventOf(index uint64, cmd core.Command, res core.Result) (Event, bool) {
	ev := Event{Key: cmd.Key, Index: index, Mode: res.Mode, Limit: res.Limit}
	switch {
	case cmd.Op == core.OpGrant && res.Outcome == core.OutcomeGranted:
		ev.Token, ev.LeaseMS, ev.Session = res.Token, res.LeaseMS, res.Session
		if res.Created {
			ev.Type, ev.Owner = Granted, cmd.Owner
		} else {
			ev.Type = Renewed
		}
	case cmd.Op == core.OpRenew && res.Outcome == core.OutcomeRenewed:
		ev.Type, ev.Token, ev.LeaseMS = Renewed, cmd.Token, res.LeaseMS
	case cmd.Op == core.OpRelease && res.Outcome == core.OutcomeReleased:
		ev.Type, ev.Token = Released, cmd.Token
	case cmd.Op == core.OpExpire && res.Outcome == core.OutcomeExpired && res.Existed:
		ev.Type, ev.Token = Expired, cmd.Token
	default:
		return Event{}, false
	}
	return ev, true
}

// AppendEvents appends the events of an applied entry to dst and returns
// the extended slice: EventOf's one event, or, for a session's end (a
// CloseSession: Released; an ExpireSession that ended it: Expired;
// docs/design.md#sessions),
// one event per holder the end removed, in key and token order, all with
// index; for a RenewBatch, the Renewed event of each lock it renewed, in
// the batch's order (core.EachRenewal), as entries of their own would
// give. Deterministic, like EventOf.
func AppendEvents(dst []Event, index uint64, cmd core.Command, res core.Result) []Event {
	if cmd.Op == core.OpRenewBatch {
		core.EachRenewal(cmd, res, func(cmd core.Command, res core.Result) {
			if ev, ok := EventOf(index, cmd, res); ok {
				dst = append(dst, ev)
			}
		})
		return dst
	}
	if res.Ended == nil {
		if ev, ok := EventOf(index, cmd, res); ok {
			dst = append(dst, ev)
		}
		return dst
	}
	typ := Released
	if cmd.Op == core.OpExpireSession {
		typ = Expired
	}
	for _, lk := range res.Ended.Locks {
		ev := Event{Type: typ, Key: lk.Key, Token: lk.Token, Session: lk.Session, Index: index}
		if lk.Mode != core.ModeExclusive || lk.Limit != 0 {
			ev.Mode, ev.Limit = lk.Mode, lk.Limit
		}
		dst = append(dst, ev)
	}
	return dst
}
