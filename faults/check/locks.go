package check

import (
	"sort"

	"github.com/ticketd/ticketd/faults/history"
)

// grant is one lock acknowledged to a client: the (key, owner, token) of at
// least one OK Acquire, with the bounds the history puts on its life.
type grant struct {
	Key   string
	Owner string
	Token uint64
	// Earliest is the earliest time the grant can have been applied: the
	// first Call of any Acquire for (Key, Owner), whatever its outcome (a
	// retry may return a lock granted by an earlier, unanswered attempt).
	Earliest int64
	// Acked is the earliest Return of an OK Acquire that returned it: the
	// grant was applied no later.
	Acked int64
	// AckedOp is the ID of that Acquire.
	AckedOp int
	// Protected is the largest Call + lease of the OK Acquires and Renews of
	// the lock: the lock must not end before it (lease safety).
	Protected int64
	// ProtectedOp is the ID of the op that set Protected.
	ProtectedOp int
	// ReleaseCall is the first Call of any Release of the lock, whatever its
	// outcome (history.Infinity if none): the lock may end from then on.
	ReleaseCall int64
	// ReleasedOK is the first Return of an OK Release of the lock (Infinity if none).
	ReleasedOK int64
	// ReleaseOp is the ID of the op that set ReleasedOK (-1 if none).
	ReleaseOp int
	// LeaseMS is the lease of the first acknowledging Acquire, in milliseconds.
	LeaseMS int64
	// Shared, Limit and Session are the first acknowledging Acquire's mode,
	// limit and session. A holder under a session is protected
	// by its session (its acknowledged CreateSession and KeepAlives), not by
	// its own Acquire, and ends with it.
	Shared  bool
	Limit   uint32
	Session uint64
}

// exclusive reports whether g is an exclusive lock: neither shared nor a
// semaphore's slot.
func (g *grant) exclusive() bool { return !g.Shared && g.Limit == 0 }

// endsNoEarlier is the time before which the lock must still be held.
func (g *grant) endsNoEarlier() int64 { return min(g.Protected, g.ReleaseCall) }

type ownerKey struct{ key, owner string }
type tokenKey struct {
	key   string
	token uint64
}

// sessionBounds are what a history says about its sessions' lives.
type sessionBounds struct {
	// protected: the largest Call + ttl of the session's acknowledged
	// CreateSession and KeepAlives.
	protected map[uint64]int64
	// protectedOp: the op that set protected.
	protectedOp map[uint64]int
	// closeCall: the first Call of any CloseSession of the session.
	closeCall map[uint64]int64
	// closedOK, closeOp: the first Return of an OK CloseSession, and its op.
	closedOK map[uint64]int64
	closeOp  map[uint64]int
}

func sessions(ops []history.Op) sessionBounds {
	b := sessionBounds{protected: map[uint64]int64{}, protectedOp: map[uint64]int{}, closeCall: map[uint64]int64{},
		closedOK: map[uint64]int64{}, closeOp: map[uint64]int{}}
	for _, op := range ops {
		switch op.Kind {
		case history.CreateSession, history.KeepAlive:
			if op.Outcome == history.OK && op.Session > 0 {
				if p := op.Call + op.Lease()*nsPerMS; p > b.protected[op.Session] {
					b.protected[op.Session], b.protectedOp[op.Session] = p, op.ID
				}
			}
		case history.CloseSession:
			if c, ok := b.closeCall[op.Session]; !ok || op.Call < c {
				b.closeCall[op.Session] = op.Call
			}
			if r, ok := b.closedOK[op.Session]; op.Outcome == history.OK && (!ok || op.Return < r) {
				b.closedOK[op.Session], b.closeOp[op.Session] = op.Return, op.ID
			}
		}
	}
	return b
}

// grants derives every acknowledged lock of ops, sorted by key then token.
func grants(ops []history.Op) []*grant {
	sb := sessions(ops)
	firstCall := map[ownerKey]int64{}
	for _, op := range ops {
		if op.Kind != history.Acquire {
			continue
		}
		k := ownerKey{op.Key, op.Owner}
		if c, ok := firstCall[k]; !ok || op.Call < c {
			firstCall[k] = op.Call
		}
	}
	byToken := map[tokenKey]*grant{}
	var out []*grant
	for _, op := range ops {
		if op.Kind != history.Acquire || op.Outcome != history.OK {
			continue
		}
		k := tokenKey{op.Key, op.Token}
		g := byToken[k]
		if g == nil || g.Owner != op.Owner {
			if g != nil {
				continue // same token, another owner: reported by Fencing, not tracked twice
			}
			g = &grant{
				Key: op.Key, Owner: op.Owner, Token: op.Token,
				Earliest: firstCall[ownerKey{op.Key, op.Owner}],
				Acked:    history.Infinity, Protected: -1,
				ReleaseCall: history.Infinity, ReleasedOK: history.Infinity, ReleaseOp: -1,
				LeaseMS: op.Lease(),
				Shared:  op.Shared, Limit: op.Limit, Session: op.Session,
			}
			if g.Session > 0 {
				g.Protected, g.ProtectedOp = sb.protected[g.Session], sb.protectedOp[g.Session]
				if c, ok := sb.closeCall[g.Session]; ok {
					g.ReleaseCall = c
				}
				if r, ok := sb.closedOK[g.Session]; ok {
					g.ReleasedOK, g.ReleaseOp = r, sb.closeOp[g.Session]
				}
			}
			byToken[k] = g
			out = append(out, g)
		}
		if op.Return < g.Acked {
			g.Acked, g.AckedOp = op.Return, op.ID
		}
		if p := op.Call + op.Lease()*nsPerMS; p > g.Protected && g.Session == 0 {
			g.Protected, g.ProtectedOp = p, op.ID
		}
	}
	for _, op := range ops {
		g := byToken[tokenKey{op.Key, op.Token}]
		if g == nil {
			continue
		}
		switch op.Kind {
		case history.Renew:
			if op.Outcome == history.OK && g.Session == 0 {
				lease := op.ResLeaseMS
				if lease <= 0 {
					lease = g.LeaseMS
				}
				if p := op.Call + lease*nsPerMS; p > g.Protected {
					g.Protected, g.ProtectedOp = p, op.ID
				}
			}
		case history.Release:
			g.ReleaseCall = min(g.ReleaseCall, op.Call)
			if op.Outcome == history.OK && op.Return < g.ReleasedOK {
				g.ReleasedOK, g.ReleaseOp = op.Return, op.ID
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		return out[i].Token < out[j].Token
	})
	return out
}
