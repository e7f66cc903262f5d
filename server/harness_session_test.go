package server

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/applytime"
)

// This file is the harness's sessions (the interaction scripts' verbs
// create-session, keepalive, close-session and acquire session=N) and the
// session invariant they are checked against after every step:
//
//	I10 a holder under a session has no lease of its own: it lives exactly
//	    as long as its session (docs/design.md#sessions), whose lease is a
//	    lock's (docs/design.md#leases). So:
//	    (a) never early: no entry removes a holder under session S by expiry
//	        (S's ExpireSession, or an Expire of the holder itself) before the
//	        latest end acknowledged for S: the send time of a CreateSession or
//	        KeepAlive of S answered to its client plus S's TTL, or this node's
//	        apply of a successor's KeepAliveSession plus the TTL;
//	    (b) not late: once the promoted leader's clock reaches S's deadline
//	        as this node measures it (its apply of S's CreateSession or last
//	        KeepAliveSession plus the TTL), the leader has, by the time the
//	        step settles, proposed ExpireSession{S, seen} with seen that
//	        apply's index, or is still confirming its leadership for that
//	        expiry round (a held read). This is the "one expiry round" of the
//	        bound in docs/design.md#leases, with nothing else added: commit
//	        and apply are the steps' own, and the "election and barrier" part
//	        is held to it too, since a leader promoted past S's deadline
//	        must propose at once from the deadline it measured as a
//	        follower;
//	    (c) when S's end applies (CloseSession, or an ExpireSession that
//	        ended it), no holder under S is left in the table.
//
// Session ids are the indexes of their CreateSession entries, printed by
// the scripts and used by number, as tokens are.

// sessionCheck is what the checker knows of sessions (I10).
type sessionCheck struct {
	ackEnd   map[uint64]time.Time // latest end acknowledged for a session (a)
	deadline map[uint64]time.Time // this node's apply of the last CreateSession/KeepAliveSession + TTL (b)
	seen     map[uint64]uint64    // the index of that apply: the seen_index its ExpireSession must carry (b)
	late     map[uint64]uint64    // seen index already reported late, so (b) is reported once per deadline
	under    map[lockID]uint64    // holders handed to a client under a session, and that session
	ids      []uint64             // every session created since the harness observes, in log order
}

func (s *sessionCheck) init() {
	s.ackEnd = map[uint64]time.Time{}
	s.deadline = map[uint64]time.Time{}
	s.seen = map[uint64]uint64{}
	s.late = map[uint64]uint64{}
	s.under = map[lockID]uint64{}
}

// ack records that session id's lease was acknowledged to last until end.
func (s *sessionCheck) ack(id uint64, end time.Time) {
	laterEnd(s.ackEnd, id, end)
}

// createSession starts CreateSession(ttlMS) as client name, through the
// LockService handler (validation, admission, the leader-only route), as a
// client's call arrives.
func (h *harness) createSession(name string, ttlMS int64) error {
	op := &clientOp{name: name, kind: "create-session", leaseMS: ttlMS}
	svc := &lockService{n: h.n}
	return h.startOp(op, func(ctx context.Context) (core.Result, error) {
		resp, err := svc.CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: ttlMS})
		if err != nil {
			return core.Result{}, err
		}
		return core.Result{Outcome: core.OutcomeSessionCreated, Session: resp.GetSession(), LeaseMS: resp.GetTtlMs()}, nil
	})
}

// keepAlive starts KeepAlive(session) as client name, on the leader-local
// path (as renew is).
func (h *harness) keepAlive(name string, session uint64) error {
	op := &clientOp{name: name, kind: "keepalive", session: session}
	return h.startOp(op, func(ctx context.Context) (core.Result, error) {
		ttlMS, err := h.n.keepAlive(ctx, session)
		return core.Result{Outcome: core.OutcomeRenewed, Session: session, LeaseMS: ttlMS}, err
	})
}

// closeSession starts CloseSession(session) as client name, on the
// leader-local path (as release is).
func (h *harness) closeSession(name string, session uint64) error {
	op := &clientOp{name: name, kind: "close-session", session: session}
	return h.startOp(op, func(ctx context.Context) (core.Result, error) {
		return core.Result{Outcome: core.OutcomeReleased, Session: session}, h.n.closeSession(ctx, session)
	})
}

// sessionIDs returns every session created since the harness observes (the
// interleavings draw from them, ended ones included).
func (h *harness) sessionIDs() []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]uint64(nil), h.check.sess.ids...)
}

// sessionAnswered records the end a client was told for a session by a
// CreateSession or KeepAlive answer (I10 a); h.mu held.
func (c *checker) sessionAnswered(op *clientOp) {
	res := op.res.res
	switch op.kind {
	case "create-session":
		c.sess.ack(res.Session, op.sent.Add(ms(res.LeaseMS)))
	case "keepalive":
		c.sess.ack(op.session, op.sent.Add(ms(res.LeaseMS)))
	}
}

// sessionApplied keeps the session record in step with one applied entry
// and checks I10 (a) and (c) on it; now is the apply's time. h.mu held.
func (c *checker) sessionApplied(now time.Time, index uint64, cmd core.Command, res core.Result, table *core.StateMachine) {
	switch {
	case cmd.Op == core.OpCreateSession && res.Outcome == core.OutcomeSessionCreated,
		cmd.Op == core.OpKeepAliveSession && res.Outcome == core.OutcomeRenewed:
		if cmd.Op == core.OpCreateSession {
			c.sess.ids = append(c.sess.ids, res.Session)
		}
		c.sess.deadline[res.Session] = now.Add(ms(res.LeaseMS))
		c.sess.seen[res.Session] = index
	case cmd.Op == core.OpExpire && res.Existed:
		id := lockID{cmd.Key, cmd.Token}
		if s, ok := c.sess.under[id]; ok && now.Before(c.sess.ackEnd[s]) {
			c.violate("I10", "%s/%d, held under session %d, expired on its own %s before the end acknowledged for its session",
				id.key, id.token, s, c.sess.ackEnd[s].Sub(now))
		}
	case res.Ended != nil:
		s := res.Session
		if cmd.Op == core.OpExpireSession && now.Before(c.sess.ackEnd[s]) {
			c.violate("I10", "session %d expired (seen=%d) %s before the end acknowledged to its client, ending %s",
				s, cmd.SeenIndex, c.sess.ackEnd[s].Sub(now), locksList(res.Ended.Locks))
		}
		// (c): the table lists no holder under s, and none of the holders the
		// end reports, or that a client was given under s, is still held.
		if left := table.SessionLocks(s); len(left) > 0 {
			c.violate("I10", "session %d ended at %d but %s are still held under it", s, index, locksList(left))
		}
		ended := map[lockID]bool{}
		for _, lk := range res.Ended.Locks {
			ended[lockID{lk.Key, lk.Token}] = true
		}
		for id, under := range c.sess.under {
			if under == s {
				ended[id] = true
			}
		}
		for _, id := range sortedIDs(ended) {
			if _, held := table.Holder(id.key, id.token); held {
				c.violate("I10", "session %d ended at %d but its holder %s/%d is still held", s, index, id.key, id.token)
			}
			delete(c.ackEnd, id)
			delete(c.sess.under, id)
		}
		for _, d := range res.Ended.Delays {
			c.delayEnd[d.Key] = now.Add(ms(d.LockDelayMS))
		}
		if cmd.Op == core.OpCloseSession {
			for _, lk := range res.Ended.Locks {
				c.clientRemoved[lockID{lk.Key, lk.Token}] = true
			}
		}
		delete(c.sess.ackEnd, s)
		delete(c.sess.deadline, s)
		delete(c.sess.seen, s)
		delete(c.sess.late, s)
	}
}

// checkSessionDeadlines checks I10 (b) once a step has settled: every open
// session whose deadline, measured by this node, has passed while it is the
// promoted leader has its ExpireSession in the log, or the leader is still
// confirming leadership for the round. h.mu held.
func (h *harness) checkSessionDeadlines() {
	if !h.n.lessor.Primary() || !h.n.stillLeader(h.mem.Status().Term) || h.mem.HeldReads() > 0 {
		return
	}
	now := h.clock.Now()
	c := &h.check
	log := h.mem.Log()
	h.n.sm.AscendSessions(func(s core.Session) bool {
		end, ok := c.sess.deadline[s.ID]
		seen := c.sess.seen[s.ID]
		if h.restarted {
			// A restarted node measures from the end of the apply-time
			// record's bucket of its first apply (docs/design.md#leases).
			end = end.Add(applytime.Bucket)
		}
		if !ok || now.Before(end) || c.sess.late[s.ID] == seen {
			return true
		}
		for _, e := range log {
			if e.Cmd.Op == core.OpExpireSession && e.Cmd.Session == s.ID && e.Cmd.SeenIndex >= seen {
				return true
			}
		}
		c.sess.late[s.ID] = seen
		c.violate("I10", "session %d outlived its TTL: the leader's deadline passed %s ago and no ExpireSession{%d, seen=%d} is proposed, holding %s",
			s.ID, now.Sub(end), s.ID, seen, locksList(h.n.sm.SessionLocks(s.ID)))
		return true
	})
}

// sessionEndApplied is the apply hook's part for an entry that ended a
// session: I8 on each key it left, and I7's record of the keys now under a
// lock-delay. h.mu held.
func (h *harness) sessionEndApplied(end *core.SessionEnd) {
	delayed := map[string]bool{}
	for _, d := range end.Delays {
		delayed[d.Key] = true
	}
	for i, lk := range end.Locks {
		if i+1 < len(end.Locks) && end.Locks[i+1].Key == lk.Key {
			continue
		}
		h.check.table(lk.Key, h.n.sm.Holders(lk.Key))
		h.observeHeld(lk.Key, delayed[lk.Key])
	}
}

// sessionsString lists the open sessions with this node's view of each
// lease, for the scripts' state.
func (h *harness) sessionsString() string {
	var b strings.Builder
	h.n.sm.AscendSessions(func(s core.Session) bool {
		fmt.Fprintf(&b, "session %d ttl=%dms", s.ID, s.TTLMS)
		if d, ok := h.n.lessor.SessionRemaining(s.ID); ok {
			fmt.Fprintf(&b, " remaining=%s", d)
		}
		if h.n.lessor.SessionExpiring(s.ID) {
			b.WriteString(" expiring")
		}
		if h.n.lessor.Closing(s.ID) {
			b.WriteString(" closing")
		}
		b.WriteString("\n")
		return true
	})
	return b.String()
}

// locksList renders holders as "[key/token ...]".
func locksList(locks []core.Lock) string {
	parts := make([]string, 0, len(locks))
	for _, lk := range locks {
		parts = append(parts, fmt.Sprintf("%s/%d", lk.Key, lk.Token))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// delaysString renders the lock-delays a session's end recorded as
// " delays=[key:2000ms ...]", or "" when there are none.
func delaysString(delays []core.LockDelay) string {
	if len(delays) == 0 {
		return ""
	}
	parts := make([]string, 0, len(delays))
	for _, d := range delays {
		parts = append(parts, fmt.Sprintf("%s:%dms", d.Key, d.LockDelayMS))
	}
	return " delays=[" + strings.Join(parts, " ") + "]"
}

// sortedIDs returns the ids of set in key and token order.
func sortedIDs(set map[lockID]bool) []lockID {
	out := make([]lockID, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b lockID) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.token, b.token)
	})
	return out
}
