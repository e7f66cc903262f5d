package check

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"github.com/ticketd/ticketd/faults/history"
)

// holder is one holder of a key in the holders model (shared locks,
// semaphores, sessions).
type holder struct {
	Owner   string
	Token   uint64
	Shared  bool
	Limit   uint32
	Session uint64
	LeaseMS int64
	// Ghost is true for a holder granted to an Unknown Acquire and not
	// since acknowledged to its owner: it may end at any time.
	Ghost bool
	// NotBefore is the earliest time (client clock, ns) the holder may
	// expire: the largest Call + lease of its acknowledged Acquires and
	// Renews. A holder under a session is timed by its session instead
	// (model.sessionProtected).
	NotBefore int64
}

// holdersState is the model's state of a key that is used with modes,
// limits or sessions: a set of holders, each with its own token.
// It is a comparable value: the holders, sorted by token, are encoded in a
// string (encodeHolders), so that a key may have any number of them.
type holdersState struct {
	Holders string
	// N is the number of holders.
	N int
	// MinToken and Floor mean what they mean in lockState.
	MinToken uint64
	Floor    int64
}

// Field and record separators of encodeHolders: control characters, which
// owners never hold (the server refuses them).
const (
	fieldSep  = "\x1f"
	recordSep = "\x1e"
)

func encodeHolders(hs []holder) string {
	var b strings.Builder
	for i, h := range hs {
		if i > 0 {
			b.WriteString(recordSep)
		}
		fmt.Fprintf(&b, "%s\x1f%d\x1f%t\x1f%d\x1f%d\x1f%d\x1f%t\x1f%d", h.Owner, h.Token, h.Shared, h.Limit, h.Session, h.LeaseMS, h.Ghost, h.NotBefore)
	}
	return b.String()
}

func decodeHolders(s string) []holder {
	if s == "" {
		return nil
	}
	recs := strings.Split(s, recordSep)
	out := make([]holder, len(recs))
	for i, r := range recs {
		f := strings.Split(r, fieldSep)
		h := &out[i]
		h.Owner = f[0]
		h.Token, _ = strconv.ParseUint(f[1], 10, 64)
		h.Shared = f[2] == "true"
		l, _ := strconv.ParseUint(f[3], 10, 32)
		h.Limit = uint32(l)
		h.Session, _ = strconv.ParseUint(f[4], 10, 64)
		h.LeaseMS, _ = strconv.ParseInt(f[5], 10, 64)
		h.Ghost = f[6] == "true"
		h.NotBefore, _ = strconv.ParseInt(f[7], 10, 64)
	}
	return out
}

func (s holdersState) list() []holder { return decodeHolders(s.Holders) }

// with returns s holding hs, sorted by token.
func (s holdersState) with(hs []holder) holdersState {
	hs = slices.Clone(hs)
	slices.SortFunc(hs, func(a, b holder) int { return cmp.Compare(a.Token, b.Token) })
	s.Holders, s.N = encodeHolders(hs), len(hs)
	return s
}

func find(hs []holder, token uint64) int {
	return slices.IndexFunc(hs, func(h holder) bool { return h.Token == token })
}

func findOwner(hs []holder, owner string) int {
	return slices.IndexFunc(hs, func(h holder) bool { return h.Owner == owner })
}

// current is the newest holder's token (CheckToken's current_token), 0 when free.
func current(hs []holder) uint64 {
	if len(hs) == 0 {
		return 0
	}
	return hs[len(hs)-1].Token
}

func (s holdersState) String() string {
	if s.N == 0 {
		return fmt.Sprintf("free (next token ≥ %d)", s.MinToken)
	}
	var b strings.Builder
	b.WriteString("held")
	for _, h := range s.list() {
		mode := "x"
		if h.Shared {
			mode = "s"
		}
		if h.Limit > 0 {
			mode = fmt.Sprintf("sem%d", h.Limit)
		}
		fmt.Fprintf(&b, " [%d %s %s", h.Token, h.Owner, mode)
		if h.Session > 0 {
			fmt.Fprintf(&b, " s%d", h.Session)
		}
		if h.Ghost {
			b.WriteString(" ghost")
		} else if h.Session == 0 {
			fmt.Fprintf(&b, " until≥%.3fs", float64(h.NotBefore)/1e9)
		}
		b.WriteString("]")
	}
	return b.String()
}

func hashHolders(s holdersState) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%d|%s", s.MinToken, s.Floor, s.Holders)
	return h.Sum64()
}

// admits reports whether a request (shared, limit) may be granted beside
// hs: the rules of docs/semantics.md#modes-and-limits. Every holder of a key has
// the key's limit; a semaphore (limit > 0) admits up to limit holders; a
// lock admits shared holders beside shared ones and an exclusive holder
// beside none.
func admits(hs []holder, shared bool, limit uint32) bool {
	if len(hs) == 0 {
		return true
	}
	if hs[0].Limit != limit {
		return false
	}
	if limit > 0 {
		return len(hs) < int(limit)
	}
	if !shared {
		return false
	}
	for _, h := range hs {
		if !h.Shared {
			return false
		}
	}
	return true
}

// valid reports whether hs is a set of holders a key may have at once: one
// limit, at most limit holders, no exclusive holder beside another.
func valid(hs []holder) bool {
	for i := range hs {
		if !admits(append(slices.Clone(hs[:i]), hs[i+1:]...), hs[i].Shared, hs[i].Limit) {
			return false
		}
	}
	return true
}

// endBound is the earliest time holder h of key may end without a client
// asking (expiry, its session's end, an Unknown Release or CloseSession),
// 0 for a ghost.
func (m *model) endBound(p *pending, h holder) int64 {
	if h.Ghost {
		return 0
	}
	lb := h.NotBefore
	if h.Session > 0 {
		lb = m.sessionProtected[h.Session]
		if c, ok := m.closeCall[h.Session]; ok {
			lb = min(lb, c)
		}
	}
	if c, ok := p.releaseCall(h.Token); ok {
		lb = min(lb, c)
	}
	return lb
}

// maxChoices bounds the sets of holders stepHolders tries ending before an
// Acquire of a full semaphore: every choice of the holders to end if there
// are at most this many, else the earliest-ending ones only.
const maxChoices = 20

// stepHolders is step for a key used with modes, limits or sessions.
//
// Before op takes effect, holders may have ended on their own (endBound):
// the model ends only those whose end op calls for (needs) — a Get that
// does not list them, a grant they would block, a current_token older than
// theirs — right before op. Ending a holder later than it could have
// ended never makes an operation impossible that ending it earlier allows
// (ending it raises the linearisation bound Floor), so this is exact (but
// for a semaphore grant with more than maxChoices ways to free a slot), and
// it keeps porcupine's sets of states small where ending every subset of
// them would not. A holder under a session whose CloseSession was
// acknowledged before op was called has ended.
//
// Unknown Acquires are not fired ahead as in lockState: a holder granted to
// one is added when an operation observes it (a Get listing it, a retry
// returning it), and a refusal or a current_token that only an unobserved
// grant of an Unknown Acquire could explain is allowed; both make the
// model more permissive, never stricter.
func (m *model) stepHolders(s holdersState, op *history.Op) []holdersState {
	ret := op.Return
	p := m.pending[op.Key]
	feasible := func(lb int64) bool { return max(lb, s.Floor, op.Call) <= ret }
	if !feasible(0) {
		return nil
	}
	all := s.list()
	hs := all[:0:0]
	for _, h := range all {
		if r, ok := m.closedBy[h.Session]; h.Session > 0 && ok && r < op.Call {
			continue // its session's end was acknowledged before op
		}
		hs = append(hs, h)
	}
	var out []holdersState
	seen := map[string]bool{}
	for _, end := range needs(op, hs) {
		key := fmt.Sprint(end)
		if seen[key] {
			continue
		}
		seen[key] = true
		floor := s.Floor
		var left []holder
		ok := true
		for _, h := range hs {
			if !end[h.Token] {
				left = append(left, h)
				continue
			}
			lb := m.endBound(p, h)
			if !feasible(lb) {
				ok = false
				break
			}
			floor = max(floor, lb)
		}
		if !ok {
			continue
		}
		pre := s.with(left)
		pre.Floor = floor
		out = append(out, m.applyHolders(pre, op, p)...)
	}
	return out
}

// needs returns the sets of holders (by token) that may have to end before
// op for op's outcome to be possible: always none; those a Get does not
// list; those newer than a CheckToken's current_token, with its token or
// without; for an OK Acquire, another holder of its owner, and those that
// would not admit it (for a semaphore, any choice of enough holders to
// leave a slot); for a refused one, its owner's holder, or every holder (a
// LimitMismatch on a key that looks free).
func needs(op *history.Op, hs []holder) []map[uint64]bool {
	set := func(f func(h holder) bool) map[uint64]bool {
		out := map[uint64]bool{}
		for _, h := range hs {
			if f(h) {
				out[h.Token] = true
			}
		}
		return out
	}
	out := []map[uint64]bool{{}}
	switch op.Kind {
	case history.Get:
		listed := map[uint64]bool{}
		for _, h := range op.Holders {
			listed[h.Token] = true
		}
		if len(op.Holders) == 0 && op.Held {
			listed[op.HolderToken] = true
		}
		return []map[uint64]bool{set(func(h holder) bool { return !listed[h.Token] })}
	case history.CheckToken:
		out = append(out,
			set(func(h holder) bool { return h.Token > op.HolderToken }),
			set(func(h holder) bool { return h.Token > op.HolderToken || h.Token == op.Token }))
	case history.Release, history.Renew:
		out = append(out, set(func(h holder) bool { return h.Token == op.Token }))
	case history.Acquire:
		stale := func(h holder) bool { return h.Owner == op.Owner && (op.Outcome != history.OK || h.Token != op.Token) }
		if op.Outcome != history.OK {
			return append(out, set(stale), set(func(holder) bool { return true }))
		}
		blocks := func(h holder) bool {
			return stale(h) || h.Limit != op.Limit || (op.Limit == 0 && (!op.Shared || !h.Shared))
		}
		base := set(blocks)
		out = append(out, base)
		if op.Limit == 0 {
			return out
		}
		var same []holder
		for _, h := range hs {
			if !blocks(h) && h.Owner != op.Owner {
				same = append(same, h)
			}
		}
		k := len(same) - int(op.Limit) + 1
		if k <= 0 {
			return out
		}
		for _, choice := range choose(same, k) {
			end := maps.Clone(base)
			for _, h := range choice {
				end[h.Token] = true
			}
			out = append(out, end)
		}
	}
	return out
}

// choose returns the ways to pick k of hs: all of them when there are at
// most maxChoices, else only the k earliest-ending (lowest NotBefore).
func choose(hs []holder, k int) [][]holder {
	var out [][]holder
	var rec func(from int, picked []holder)
	rec = func(from int, picked []holder) {
		if len(out) > maxChoices {
			return
		}
		if len(picked) == k {
			out = append(out, slices.Clone(picked))
			return
		}
		for i := from; i < len(hs); i++ {
			rec(i+1, append(picked, hs[i]))
		}
	}
	rec(0, nil)
	if len(out) <= maxChoices {
		return out
	}
	sorted := slices.Clone(hs)
	slices.SortFunc(sorted, func(a, b holder) int { return cmp.Compare(a.NotBefore, b.NotBefore) })
	return [][]holder{sorted[:k]}
}

// unobserved reports whether an Unknown Acquire of op's key, called no
// later than op returned and by another owner than op's, may hold a grant
// the model has not seen.
func (p *pending) unobserved(op *history.Op) bool {
	if p == nil || p.firstAcquire > op.Return {
		return false
	}
	for owner, c := range p.acquirers {
		if c <= op.Return && owner != op.Owner {
			return true
		}
	}
	return false
}

// applyHolders is op's own effect on pre, for a key with holders.
func (m *model) applyHolders(pre holdersState, op *history.Op, p *pending) []holdersState {
	hs := pre.list()
	switch op.Kind {
	case history.Acquire:
		switch {
		case op.Outcome == history.OK:
			return m.grantHolder(pre, op, p)
		case op.Code == connect.CodeAlreadyExists.String():
			if i := findOwner(hs, op.Owner); i >= 0 && !hs[i].Ghost {
				return nil // a retry returns the owner's holder
			}
			if (len(hs) > 0 && hs[0].Limit == op.Limit && !admits(hs, op.Shared, op.Limit)) || p.unobserved(op) {
				return []holdersState{pre}
			}
			return nil
		case op.Code == connect.CodeFailedPrecondition.String():
			// LimitMismatch: the key's holders or waiters have another
			// limit. Waiters are invisible here, so a free key allows it.
			if len(hs) == 0 || p.unobserved(op) || (hs[0].Limit != op.Limit && hs[0].Limit == op.KeyLimit) {
				return []holdersState{pre}
			}
			return nil
		}
		return nil
	case history.Release:
		i := find(hs, op.Token)
		if op.Outcome == history.OK {
			if i < 0 {
				return nil
			}
			return []holdersState{pre.with(slices.Delete(hs, i, i+1))}
		}
		if i < 0 {
			return []holdersState{pre}
		}
		return nil
	case history.Renew:
		i := find(hs, op.Token)
		if op.Outcome == history.OK {
			if i < 0 {
				return nil
			}
			h := &hs[i]
			lease := op.ResLeaseMS
			if lease <= 0 {
				lease = h.LeaseMS
			}
			h.Ghost = false
			if h.Session == 0 {
				h.NotBefore = max(h.NotBefore, op.Call+lease*nsPerMS)
			}
			return []holdersState{pre.with(hs)}
		}
		if i < 0 {
			return []holdersState{pre}
		}
		if lb := m.endBound(p, hs[i]); max(pre.Floor, lb, op.Call) <= op.Return {
			pre.Floor = max(pre.Floor, lb)
			return []holdersState{pre}
		}
		return nil
	case history.Get:
		return m.observe(pre, hs, op, p)
	case history.CheckToken:
		cur := current(hs)
		ghost := false
		if op.HolderToken != cur {
			if op.HolderToken < cur || !p.unobserved(op) {
				return nil
			}
			ghost = true // a newer holder the model has not seen
		}
		i := find(hs, op.Token)
		if op.Valid {
			if i >= 0 || p.unobserved(op) {
				return []holdersState{pre}
			}
			return nil
		}
		if i < 0 || ghost && op.Token == op.HolderToken {
			return []holdersState{pre}
		}
		// A holder that is no longer valid: its lease ran out and its
		// Expire is not applied yet, or it is a ghost being released.
		if hs[i].Ghost {
			return []holdersState{pre}
		}
		if lb := m.endBound(p, hs[i]); max(pre.Floor, lb, op.Call) <= op.Return {
			pre.Floor = max(pre.Floor, lb)
			return []holdersState{pre}
		}
		return nil
	}
	return nil
}

// newHolder is the holder an OK Acquire op creates.
func (m *model) newHolder(op *history.Op) holder {
	h := holder{Owner: op.Owner, Token: op.Token, Shared: op.Shared, Limit: op.Limit, Session: op.Session, LeaseMS: op.Lease()}
	if h.Session == 0 {
		h.NotBefore = op.Call + h.LeaseMS*nsPerMS
	}
	return h
}

// grantHolder is an OK Acquire: a retry returns the owner's holder (its
// acknowledgement counts as a renewal); otherwise a new holder, admitted
// beside the others, with a token above every earlier grant of the key —
// or, for the owner of an Unknown Acquire, a grant made earlier and not
// observed since.
func (m *model) grantHolder(pre holdersState, op *history.Op, p *pending) []holdersState {
	hs := pre.list()
	if r, ok := m.closedBy[op.Session]; op.Session > 0 && ok && r < op.Call {
		return nil // acquired under a session whose end was acknowledged before
	}
	if i := findOwner(hs, op.Owner); i >= 0 {
		if hs[i].Token != op.Token {
			return nil
		}
		h := &hs[i]
		h.Ghost = false
		h.LeaseMS = op.Lease()
		if h.Session == 0 {
			h.NotBefore = max(h.NotBefore, op.Call+h.LeaseMS*nsPerMS)
		}
		return []holdersState{pre.with(hs)}
	}
	if find(hs, op.Token) >= 0 || !admits(hs, op.Shared, op.Limit) {
		return nil
	}
	c, unknown := p.acquirerCall(op.Owner)
	if op.Token < pre.MinToken && (!unknown || c > op.Return) {
		return nil
	}
	post := pre.with(append(hs, m.newHolder(op)))
	post.MinToken = max(post.MinToken, op.Token+1)
	return []holdersState{post}
}

func (p *pending) acquirerCall(owner string) (int64, bool) {
	if p == nil {
		return 0, false
	}
	c, ok := p.acquirers[owner]
	return c, ok
}

// observe is an OK Get: the key's holders are exactly those listed. A
// listed holder the model does not hold is a grant of an Unknown Acquire of
// its owner (called no later than the Get returned), added as a ghost.
func (m *model) observe(pre holdersState, cur []holder, op *history.Op, p *pending) []holdersState {
	seen := op.Holders
	if len(seen) == 0 && op.Held {
		seen = []history.Holder{{Token: op.HolderToken, Owner: op.HolderOwner}}
	}
	if !op.Held {
		seen = nil
	}
	if len(seen) != len(slices.CompactFunc(slices.Clone(seen), func(a, b history.Holder) bool { return a.Token == b.Token })) {
		return nil
	}
	var hs []holder
	matched := 0
	minToken := pre.MinToken
	for _, o := range seen {
		if i := find(cur, o.Token); i >= 0 {
			if cur[i].Owner != o.Owner || (len(op.Holders) > 0 && cur[i].Session != o.Session) {
				return nil
			}
			hs = append(hs, cur[i])
			matched++
			continue
		}
		req, ok := p.unknownRequest(o.Owner, op.Return)
		if !ok || findOwner(cur, o.Owner) >= 0 {
			return nil
		}
		hs = append(hs, holder{Owner: o.Owner, Token: o.Token, Shared: req.Shared, Limit: req.Limit, Session: req.Session, LeaseMS: req.LeaseMS, Ghost: true})
		minToken = max(minToken, o.Token+1)
	}
	if matched != len(cur) || !valid(hs) {
		return nil
	}
	if len(hs) > 0 && (hs[0].Limit != op.KeyLimit || op.KeyShared != hs[0].Shared) {
		return nil
	}
	post := pre.with(hs)
	post.MinToken = minToken
	return []holdersState{post}
}

// unknownRequest returns the earliest Unknown Acquire of owner on the
// pending key, if it was called no later than ret.
func (p *pending) unknownRequest(owner string, ret int64) (*history.Op, bool) {
	if p == nil {
		return nil, false
	}
	op, ok := p.requests[owner]
	if !ok || op.Call > ret {
		return nil, false
	}
	return op, true
}
