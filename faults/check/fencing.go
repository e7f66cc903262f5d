package check

import (
	"fmt"
	"sort"

	"github.com/ticketd/ticketd/faults/history"
)

// Fencing checks the fencing-token properties over all keys (Chubby §2.4
// sequencers; Kleppmann's fencing tokens):
//
//   - a token is never granted twice: every OK Acquire that returned token t
//     names the same key and owner (retries of one owner's request may
//     return the same lock);
//   - tokens strictly increase in real-time order: if the grant of t1 was
//     acknowledged before any Acquire that could have produced the grant of
//     t2 was called, then t1 < t2.
func Fencing(ops []history.Op) []Violation {
	var out []Violation
	first := map[uint64]history.Op{}
	reported := map[uint64]bool{}
	for _, op := range ops {
		if op.Kind != history.Acquire || op.Outcome != history.OK {
			continue
		}
		prev, seen := first[op.Token]
		if !seen {
			first[op.Token] = op
			continue
		}
		if (prev.Key != op.Key || prev.Owner != op.Owner) && !reported[op.Token] {
			reported[op.Token] = true
			out = append(out, Violation{
				Property: PropFencing, Key: op.Key, OpIDs: []int{prev.ID, op.ID},
				Detail: fmt.Sprintf("token %d granted twice: to %q on key %q and to %q on key %q",
					op.Token, prev.Owner, prev.Key, op.Owner, op.Key),
			})
		}
	}

	gs := grants(ops)
	// Sweep: grants by Acked ascending feed a running maximum token; each
	// grant, visited in Earliest order, must exceed every token acknowledged
	// strictly before its Earliest.
	byAcked := append([]*grant(nil), gs...)
	sort.Slice(byAcked, func(i, j int) bool { return byAcked[i].Acked < byAcked[j].Acked })
	byEarliest := append([]*grant(nil), gs...)
	sort.Slice(byEarliest, func(i, j int) bool { return byEarliest[i].Earliest < byEarliest[j].Earliest })
	var best *grant
	i := 0
	for _, g := range byEarliest {
		for i < len(byAcked) && byAcked[i].Acked < g.Earliest {
			if best == nil || byAcked[i].Token > best.Token {
				best = byAcked[i]
			}
			i++
		}
		if best != nil && best.Token >= g.Token && !reported[g.Token] {
			reported[g.Token] = true
			out = append(out, Violation{
				Property: PropFencing, Key: g.Key, OpIDs: []int{best.AckedOp, g.AckedOp},
				Detail: fmt.Sprintf("token %d (key %q, owner %q) was granted after token %d (key %q, owner %q) was acknowledged: tokens must increase",
					g.Token, g.Key, g.Owner, best.Token, best.Key, best.Owner),
			})
		}
	}
	return out
}
