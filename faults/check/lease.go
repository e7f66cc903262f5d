package check

import (
	"fmt"
	"sort"
	"time"

	"github.com/ticketd/ticketd/faults/history"
)

// LeaseSafety checks, key by key, that no two locks of a key were alive at
// once. A lock is certainly alive from its acknowledgement (the Return of
// its first OK Acquire) until the earlier of its protection end (its last
// acknowledged Acquire or Renew call started + lease_ms) and the first Call
// of a Release of it. Times are the client's monotonic clock, so a lease is
// measured from the moment the client sent its request (DESIGN.md: "a lease
// is a lower bound ... never earlier"). A grant acknowledged only after that
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
		// Sweep by acknowledgement, keeping the earlier lock that must live longest.
		var longest *grant
		for _, g := range gs {
			if g.Acked >= g.endsNoEarlier() {
				continue // delivered after its own lease: never certainly alive
			}
			if longest != nil && g.Acked < longest.endsNoEarlier() {
				out = append(out, Violation{
					Property: PropLease, Key: g.Key, OpIDs: []int{longest.ProtectedOp, g.AckedOp},
					Detail: fmt.Sprintf("token %d (owner %q) was granted by %v, but token %d (owner %q) was protected until %v (released no earlier than %v)",
						g.Token, g.Owner, time.Duration(g.Acked), longest.Token, longest.Owner,
						time.Duration(longest.Protected), durationOrNever(longest.ReleaseCall)),
				})
			}
			if longest == nil || g.endsNoEarlier() > longest.endsNoEarlier() {
				longest = g
			}
		}
	}
	return out
}

func durationOrNever(ns int64) string {
	if ns == history.Infinity {
		return "never"
	}
	return time.Duration(ns).String()
}
