package check

import (
	"fmt"
	"time"

	"github.com/ticketd/ticketd/faults/history"
)

// TagFinal marks the Get ops a run makes after its last restart of every node:
// Durability compares them with what was acknowledged before.
const TagFinal = "final"

// Durability checks that acknowledged grants and releases survived the
// restarts of the run (a command is acknowledged only once durable on a
// majority, so kill -9 at any moment loses none of them:
// docs/design.md#storage-and-recovery), from the OK Get ops tagged TagFinal and the
// largest last_token any node reports after them (0 to skip that check):
//
//   - a lock that must still be held when a final read started (its lease,
//     counted from its last acknowledged Acquire or Renew call, had not run
//     out and no Release of it had been called) is what that read returns;
//   - a final read never returns a lock whose Release was acknowledged;
//   - the token counter never goes back: finalLastToken is at least every
//     acknowledged token.
func Durability(ops []history.Op, finalLastToken uint64) []Violation {
	var out []Violation
	gs := grants(ops)
	byKey := map[string][]*grant{}
	var maxTok *grant
	for _, g := range gs {
		byKey[g.Key] = append(byKey[g.Key], g)
		if maxTok == nil || g.Token > maxTok.Token {
			maxTok = g
		}
	}
	released := map[tokenKey]*grant{}
	for _, g := range gs {
		if g.ReleaseOp >= 0 {
			released[tokenKey{g.Key, g.Token}] = g
		}
	}
	for _, op := range ops {
		if op.Tag != TagFinal || op.Kind != history.Get || op.Outcome != history.OK {
			continue
		}
		for _, g := range byKey[op.Key] {
			if g.Acked > op.Call || op.Call >= g.endsNoEarlier() {
				continue // not yet certainly granted, or allowed to have ended
			}
			if !holds(op, g.Token) {
				got := "free"
				if op.Held {
					got = fmt.Sprintf("token %d (owner %q)", op.HolderToken, op.HolderOwner)
				}
				out = append(out, Violation{
					Property: PropDurability, Key: op.Key, OpIDs: []int{g.AckedOp, op.ID},
					Detail: fmt.Sprintf("lost acknowledged grant: token %d (owner %q) was protected until %v, but the final read at %v saw %s",
						g.Token, g.Owner, time.Duration(g.Protected), time.Duration(op.Call), got),
				})
			}
		}
		for _, tok := range heldTokens(op) {
			if g := released[tokenKey{op.Key, tok}]; g != nil && g.ReleasedOK < op.Call {
				out = append(out, Violation{
					Property: PropDurability, Key: op.Key, OpIDs: []int{g.ReleaseOp, op.ID},
					Detail: fmt.Sprintf("lost acknowledged release: token %d was released at %v but the final read saw it held",
						g.Token, time.Duration(g.ReleasedOK)),
				})
			}
		}
	}
	if finalLastToken > 0 && maxTok != nil && finalLastToken < maxTok.Token {
		out = append(out, Violation{
			Property: PropDurability, Key: maxTok.Key, OpIDs: []int{maxTok.AckedOp},
			Detail: fmt.Sprintf("token counter went back: last_token is %d after the restarts, but token %d was acknowledged",
				finalLastToken, maxTok.Token),
		})
	}
	return out
}

// heldTokens lists the tokens an OK Get saw holding its key: every listed
// holder, or the singular holder of a history without holders.
func heldTokens(op history.Op) []uint64 {
	if !op.Held {
		return nil
	}
	if len(op.Holders) == 0 {
		return []uint64{op.HolderToken}
	}
	out := make([]uint64, 0, len(op.Holders))
	for _, h := range op.Holders {
		out = append(out, h.Token)
	}
	return out
}

// holds reports whether an OK Get saw token holding its key.
func holds(op history.Op, token uint64) bool {
	for _, t := range heldTokens(op) {
		if t == token {
			return true
		}
	}
	return false
}
