package check

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/ticketd/ticketd/faults/history"
)

// LeaseSafety checks, key by key, that no two locks of a key were alive at
// once where one of them is exclusive, and that no more holders
// of a semaphore than its limit were (PropLimit). A lock is certainly alive from its acknowledgement (the Return of
// its first OK Acquire) until the earlier of its protection end (its last
// acknowledged Acquire or Renew call started + lease_ms) and the first Call
// of a Release of it. Times are the client's monotonic clock, so a lease is
// measured from the moment the client sent its request (docs/design.md#leases:
// "a lease is a lower bound ... never earlier"). A grant acknowledged only after that
// protection ended (its reply held up, e.g. in a paused node, past the
// client's own deadline) was never certainly alive: its client receives a
// lease already over and must treat it as lost, as the SDK does, so it
// overlaps nothing. Tokens play no part: an inverted token is Fencing's to
// report.
func LeaseSafety(ops []history.Op) []Violation {
	var out []Violation
	byKey := map[string][]*grant{}
	var keys []string
	for _, g := range grants(ops) {
		if byKey[g.Key] == nil {
			keys = append(keys, g.Key)
		}
		byKey[g.Key] = append(byKey[g.Key], g)
	}
	sort.Strings(keys)
	for _, k := range keys {
		gs := byKey[k]
		sort.Slice(gs, func(i, j int) bool { return gs[i].Acked < gs[j].Acked })
		// Sweep by acknowledgement, keeping the earlier locks that are
		// certainly alive when the next one is acknowledged.
		var alive []*grant
		for _, g := range gs {
			if g.Acked >= g.endsNoEarlier() {
				continue // delivered after its own lease: never certainly alive
			}
			alive = slices.DeleteFunc(alive, func(a *grant) bool { return a.endsNoEarlier() <= g.Acked })
			if v, ok := conflict(g, alive); ok {
				out = append(out, v)
			}
			alive = append(alive, g)
		}
	}
	return out
}

// conflict reports the violation, if any, of granting g while alive (the
// key's earlier grants that must still be held) hold it
// (docs/semantics.md#modes-and-limits): an
// exclusive lock beside any other holder, a shared one beside an exclusive
// holder (PropLease, against the one that must live longest), or more
// holders of a semaphore than its limit, or holders of two limits at once
// (PropLimit).
func conflict(g *grant, alive []*grant) (Violation, bool) {
	var longest *grant
	for _, a := range alive {
		if (g.exclusive() || a.exclusive()) && g.Limit == 0 && a.Limit == 0 && (longest == nil || a.endsNoEarlier() > longest.endsNoEarlier()) {
			longest = a
		}
	}
	if longest != nil {
		return Violation{
			Property: PropLease, Key: g.Key, OpIDs: []int{longest.ProtectedOp, g.AckedOp},
			Detail: fmt.Sprintf("token %d (owner %q%s) was granted by %v, but token %d (owner %q%s) was protected until %v (released no earlier than %v)",
				g.Token, g.Owner, modeNote(g), time.Duration(g.Acked), longest.Token, longest.Owner, modeNote(longest),
				time.Duration(longest.Protected), durationOrNever(longest.ReleaseCall)),
		}, true
	}
	if len(alive) == 0 {
		return Violation{}, false
	}
	var tokens []uint64
	ids := []int{}
	mixed := false
	for _, a := range alive {
		tokens = append(tokens, a.Token)
		ids = append(ids, a.AckedOp)
		mixed = mixed || a.Limit != g.Limit
	}
	ids = append(ids, g.AckedOp)
	switch {
	case mixed:
		return Violation{Property: PropLimit, Key: g.Key, OpIDs: ids,
			Detail: fmt.Sprintf("token %d (owner %q%s) was granted by %v beside holders %v of another limit", g.Token, g.Owner, modeNote(g), time.Duration(g.Acked), tokens)}, true
	case g.Limit > 0 && len(alive)+1 > int(g.Limit):
		return Violation{Property: PropLimit, Key: g.Key, OpIDs: ids,
			Detail: fmt.Sprintf("token %d (owner %q) was granted by %v as holder %d of a semaphore of limit %d: holders %v must still be held",
				g.Token, g.Owner, time.Duration(g.Acked), len(alive)+1, g.Limit, tokens)}, true
	}
	return Violation{}, false
}

func modeNote(g *grant) string {
	switch {
	case g.Shared:
		return ", shared"
	case g.Limit > 0:
		return fmt.Sprintf(", limit %d", g.Limit)
	}
	return ""
}

func durationOrNever(ns int64) string {
	if ns == history.Infinity {
		return "never"
	}
	return time.Duration(ns).String()
}
