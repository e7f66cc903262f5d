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
}

// endsNoEarlier is the time before which the lock must still be held.
func (g *grant) endsNoEarlier() int64 { return min(g.Protected, g.ReleaseCall) }

type ownerKey struct{ key, owner string }
type tokenKey struct {
	key   string
	token uint64
}

// grants derives every acknowledged lock of ops, sorted by key then token.
func grants(ops []history.Op) []*grant {
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
			}
			byToken[k] = g
			out = append(out, g)
		}
		if op.Return < g.Acked {
			g.Acked, g.AckedOp = op.Return, op.ID
		}
		if p := op.Call + op.Lease()*nsPerMS; p > g.Protected {
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
			if op.Outcome == history.OK {
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
