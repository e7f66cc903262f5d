package check

import (
	"fmt"
	"hash/fnv"
	"sort"

	"connectrpc.com/connect"
	"github.com/anishathalye/porcupine"

	"github.com/ticketd/ticketd/faults/history"
)

// lockState is the model's state of one key (the model is partitioned by key).
// It is a comparable value: states are compared with ==.
type lockState struct {
	// Held says whether the key is held; Owner, Token and LeaseMS describe the lock.
	Held bool
	// Owner is the lock's owner; "" while it is unknown (a ghost lock granted
	// to one of the key's Unknown Acquires, not yet observed).
	Owner string
	// Token is the lock's fencing token; 0 while it is unknown (granted by an
	// Unknown Acquire and not yet observed).
	Token   uint64
	LeaseMS int64
	// Ghost is true for a lock granted by an Unknown Acquire and not since
	// acknowledged to its owner: the server may release it at any time (a
	// ghost lock, docs/design.md#ghost-locks), or it may expire at any time (its lease
	// was never acknowledged to anyone).
	Ghost bool
	// NotBefore is the earliest time (client clock, ns) the lock may expire: the
	// largest Call + lease of the acknowledged Acquires and Renews of the lock.
	NotBefore int64
	// MinToken bounds the key's tokens from below: the next grant's token (or
	// an unknown Token, once observed) is at least MinToken.
	MinToken uint64
	// Floor is a lower bound (client clock, ns) on the linearisation point of
	// the last linearised operation that comes from server-side events: an
	// operation linearised right after an expiry takes effect at or after the
	// lock's NotBefore, and every operation after it too. (The bound that
	// comes from Call times needs no state: porcupine linearises an operation
	// only before every pending operation's Return.) Keeping only this part
	// keeps the number of distinct states, and so porcupine's search, small.
	Floor int64
}

func (s lockState) String() string {
	if !s.Held {
		return fmt.Sprintf("free (next token ≥ %d)", s.MinToken)
	}
	tok, owner := fmt.Sprint(s.Token), s.Owner
	if s.Token == 0 {
		tok = fmt.Sprintf("?≥%d", s.MinToken)
	}
	if owner == "" {
		owner = "?"
	}
	if s.Ghost {
		return fmt.Sprintf("ghost token=%s owner=%s", tok, owner)
	}
	return fmt.Sprintf("held token=%s owner=%s until≥%.3fs", tok, owner, float64(s.NotBefore)/1e9)
}

// matches reports whether the lock in s can have token t, and returns s with
// an unknown token resolved to t.
func (s lockState) matches(t uint64) (lockState, bool) {
	switch {
	case !s.Held:
		return s, false
	case s.Token == t:
		return s, true
	case s.Token == 0 && t >= s.MinToken:
		s.Token, s.MinToken = t, t+1
		return s, true
	}
	return s, false
}

// mayDiffer reports whether the lock in s can be something other than the lock
// with token t (free, another token, or an unknown token that may differ).
func (s lockState) mayDiffer(t uint64) bool { return !s.Held || s.Token != t }

// vanished returns s after the lock ended (expiry, ghost release, or an
// Unknown Release taking effect). An unknown token is forgotten rather than
// bounding the next one: Fencing checks token order globally.
func (s lockState) vanished() lockState {
	return lockState{MinToken: s.MinToken, Floor: s.Floor}
}

const nsPerMS = int64(1e6)

// pending holds one key's Unknown mutations: they are not operations of the
// porcupine history but events that may happen inside the model at any time
// after their Call, like expiry. (Were they operations with an infinite
// Return, porcupine would try every position for each of them and an illegal
// history would take exponential time to refute.)
type pending struct {
	// acquirers maps the owner of an Unknown Acquire to its earliest Call.
	acquirers map[string]int64
	// releases maps the token of an Unknown Release to its earliest Call.
	releases map[uint64]int64
	// firstAcquire is the earliest Call in acquirers.
	firstAcquire int64
	// requests maps the owner of an Unknown Acquire to its earliest one
	// (its mode, limit and session, for the holders model).
	requests map[string]*history.Op
}

// model is the lock-table model for one history.
type model struct {
	pending map[string]*pending
	// holderKeys are the keys used with modes, limits or sessions: their
	// partitions use holdersState; every other key keeps
	// lockState, the exclusive model, exactly as before.
	holderKeys map[string]bool
	// sessionProtected is, per session, the largest Call + ttl of its
	// acknowledged CreateSession and KeepAlives: a session's holders do not
	// expire before it.
	sessionProtected map[uint64]int64
	// closeCall is, per session, the earliest Call of a CloseSession
	// whatever its outcome: its holders may end from then on.
	closeCall map[uint64]int64
	// closedBy is, per session, the earliest Return of an OK CloseSession:
	// its holders have ended before any operation called after it.
	closedBy map[uint64]int64
}

func newModelFor(ops []history.Op) *model {
	m := &model{pending: map[string]*pending{}, holderKeys: map[string]bool{},
		sessionProtected: map[uint64]int64{}, closeCall: map[uint64]int64{}, closedBy: map[uint64]int64{}}
	for i := range ops {
		op := &ops[i]
		switch op.Kind {
		case history.CreateSession, history.KeepAlive:
			if op.Outcome == history.OK && op.Session > 0 {
				ttl := op.Lease()
				m.sessionProtected[op.Session] = max(m.sessionProtected[op.Session], op.Call+ttl*nsPerMS)
			}
			continue
		case history.CloseSession:
			if c, ok := m.closeCall[op.Session]; !ok || op.Call < c {
				m.closeCall[op.Session] = op.Call
			}
			if r, ok := m.closedBy[op.Session]; op.Outcome == history.OK && (!ok || op.Return < r) {
				m.closedBy[op.Session] = op.Return
			}
			continue
		}
		if !op.Plain() {
			m.holderKeys[op.Key] = true
		}
		if op.Outcome != history.Unknown || (op.Kind != history.Acquire && op.Kind != history.Release) {
			continue
		}
		p := m.pending[op.Key]
		if p == nil {
			p = &pending{acquirers: map[string]int64{}, releases: map[uint64]int64{}, firstAcquire: history.Infinity,
				requests: map[string]*history.Op{}}
			m.pending[op.Key] = p
		}
		switch op.Kind {
		case history.Acquire:
			if c, ok := p.acquirers[op.Owner]; !ok || op.Call < c {
				p.acquirers[op.Owner] = op.Call
				p.requests[op.Owner] = op
			}
			p.firstAcquire = min(p.firstAcquire, op.Call)
		case history.Release:
			if c, ok := p.releases[op.Token]; !ok || op.Call < c {
				p.releases[op.Token] = op.Call
			}
		}
	}
	return m
}

// modelled reports whether op is an operation of the porcupine history. Left
// out: Unknown Acquires and Releases (events of the model, see pending);
// Unknown reads (they returned nothing and changed nothing); Unknown Renews
// (a renewal only makes a lock live longer, and a lock may always live longer
// than its lease since expiry is optional in the model, so assuming it did
// not happen never rejects a correct history); and failed calls whose error
// says nothing about the lock table (InvalidArgument, ResourceExhausted, a
// refused connection): only AlreadyExists from Acquire and NotFound from
// Release and Renew are kept, and FailedPrecondition (LimitMismatch) from an
// Acquire with a mode, limit or session. The session calls
// (CreateSession, KeepAlive, CloseSession) have no key: the model knows
// them as bounds on their holders' lives (see model).
func modelled(op *history.Op) bool {
	switch op.Kind {
	case history.CreateSession, history.KeepAlive, history.CloseSession:
		return false
	}
	switch op.Outcome {
	case history.OK:
		return true
	case history.Fail:
		switch op.Kind {
		case history.Acquire:
			if op.Code == connect.CodeFailedPrecondition.String() {
				return !op.Plain()
			}
			return op.Code == connect.CodeAlreadyExists.String()
		case history.Release, history.Renew:
			return op.Code == connect.CodeNotFound.String()
		}
	}
	return false
}

// step returns every state the key can be in after op, starting from s.
//
// Before op takes effect, server-side events may happen: the lock ends on its
// own (at any time if it is a ghost, at or after NotBefore by expiry, at or
// after the Call of an Unknown Release of its token), and on a free key one
// of the key's Unknown Acquires may be granted, as a ghost lock. Then op's own
// effect applies.
func (m *model) step(s lockState, op *history.Op) []lockState {
	ret := op.Return
	p := m.pending[op.Key]
	feasible := func(lb int64) bool { return max(lb, s.Floor, op.Call) <= ret }
	if !feasible(0) {
		return nil // op returned before an expiry that was linearised before it
	}
	pre := []lockState{s}
	if s.Held {
		lb := s.NotBefore
		if s.Ghost {
			lb = 0
		} else if c, ok := p.releaseCall(s.Token); ok {
			lb = min(lb, c)
		}
		if feasible(lb) {
			v := s.vanished()
			v.Floor = max(v.Floor, lb)
			pre = append(pre, v)
		}
	}
	if p != nil && feasible(p.firstAcquire) {
		for _, f := range pre {
			if !f.Held {
				pre = append(pre, lockState{Held: true, Ghost: true, MinToken: f.MinToken, Floor: f.Floor})
				break
			}
		}
	}
	var out []lockState
	for _, ps := range pre {
		out = append(out, m.apply(ps, op, p)...)
	}
	return out
}

func (p *pending) releaseCall(token uint64) (int64, bool) {
	if p == nil {
		return 0, false
	}
	c, ok := p.releases[token]
	return c, ok
}

// ghostOwner reports whether a ghost lock of unknown owner can belong to
// owner, an Unknown Acquire of the key called no later than ret, and
// returns s with its owner resolved.
func (p *pending) ghostOwner(s lockState, owner string, ret int64) (lockState, bool) {
	if p == nil || s.Owner != "" {
		return s, false
	}
	c, ok := p.acquirers[owner]
	if !ok || c > ret {
		return s, false
	}
	s.Owner = owner
	s.Floor = max(s.Floor, c)
	return s, true
}

// apply is op's own effect on pre.
func (m *model) apply(pre lockState, op *history.Op, p *pending) []lockState {
	ret := op.Return
	switch op.Kind {
	case history.Acquire:
		if op.Outcome == history.Fail { // AlreadyExists
			if pre.Held && (pre.Owner != op.Owner || pre.Ghost) {
				return []lockState{pre}
			}
			return nil
		}
		lease := op.Lease()
		var out []lockState
		// Held by the same owner: a retry gets the same lock, and its
		// acknowledgement counts as a renewal from this call on.
		same, ok := pre, pre.Held && pre.Owner == op.Owner
		if !ok && pre.Held {
			same, ok = p.ghostOwner(pre, op.Owner, ret)
		}
		if ok {
			if post, ok := same.matches(op.Token); ok {
				post.Ghost = false
				post.LeaseMS = lease
				post.NotBefore = max(post.NotBefore, op.Call+lease*nsPerMS)
				out = append(out, post)
			}
		}
		if !pre.Held && op.Token >= pre.MinToken {
			out = append(out, lockState{
				Held: true, Owner: op.Owner, Token: op.Token, LeaseMS: lease,
				NotBefore: op.Call + lease*nsPerMS, MinToken: op.Token + 1, Floor: pre.Floor,
			})
		}
		return out
	case history.Release:
		if op.Outcome == history.OK {
			if _, ok := pre.matches(op.Token); ok {
				return []lockState{pre.vanished()}
			}
			return nil
		}
		if pre.mayDiffer(op.Token) {
			return []lockState{pre}
		}
		return nil
	case history.Renew:
		if op.Outcome == history.OK {
			post, ok := pre.matches(op.Token)
			if !ok {
				return nil
			}
			lease := op.ResLeaseMS
			if lease <= 0 {
				lease = post.LeaseMS
			}
			post.Ghost = false
			post.NotBefore = max(post.NotBefore, op.Call+lease*nsPerMS)
			return []lockState{post}
		}
		// Refused: the lock is not held with that token, or its deadline
		// has passed and its Expire is not applied yet.
		if pre.mayDiffer(op.Token) {
			return []lockState{pre}
		}
		if max(pre.Floor, pre.NotBefore, op.Call) <= ret {
			pre.Floor = max(pre.Floor, pre.NotBefore)
			return []lockState{pre}
		}
		return nil
	case history.Get:
		if !op.Held {
			if pre.Held {
				return nil
			}
			return []lockState{pre}
		}
		post, ok := pre.matches(op.HolderToken)
		if !ok {
			return nil
		}
		if post.Owner == op.HolderOwner {
			return []lockState{post}
		}
		if post, ok := p.ghostOwner(post, op.HolderOwner, ret); ok {
			return []lockState{post}
		}
		return nil
	case history.CheckToken:
		if op.Valid {
			if post, ok := pre.matches(op.Token); ok {
				return []lockState{post}
			}
			return nil
		}
		if op.HolderToken == 0 {
			if pre.Held {
				return nil
			}
			return []lockState{pre}
		}
		post, ok := pre.matches(op.HolderToken)
		if !ok {
			return nil
		}
		if op.HolderToken != op.Token {
			return []lockState{post}
		}
		// The token still holds the key but is no longer valid: its lease
		// ran out and its Expire is not applied yet, or it is a ghost lock
		// whose Release is in flight.
		if post.Ghost {
			return []lockState{post}
		}
		if max(post.Floor, post.NotBefore, op.Call) <= ret {
			post.Floor = max(post.Floor, post.NotBefore)
			return []lockState{post}
		}
		return nil
	}
	return nil
}

func hashState(v any) uint64 {
	if hs, ok := v.(holdersState); ok {
		return hashHolders(hs)
	}
	s := v.(lockState)
	h := fnv.New64a()
	fmt.Fprintf(h, "%v|%s|%d|%d|%v|%d|%d|%d", s.Held, s.Owner, s.Token, s.LeaseMS, s.Ghost, s.NotBefore, s.MinToken, s.Floor)
	return h.Sum64()
}

// partitionByKey splits a history into one partition per key: locks on
// different keys are independent (tokens are checked globally by Fencing).
func partitionByKey(ops []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	for _, op := range ops {
		k := op.Input.(*history.Op).Key
		byKey[k] = append(byKey[k], op)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	return out
}

// NewModel returns the porcupine model of the lock table for ops,
// partitioned by key (the package documentation states its rules). A key
// used with modes, limits or sessions is checked against the
// holders model (stepHolders); every other key against the exclusive
// model, which is simpler and checks faster. The
// model knows ops' Unknown Acquires and Releases; check the operations that
// Operations(ops) returns with it. The input and the output of each
// operation are both the *history.Op.
func NewModel(ops []history.Op) porcupine.Model {
	m := newModelFor(ops)
	nm := porcupine.NondeterministicModel{
		Partition: partitionByKey,
		Init:      func() []any { return []any{lockState{MinToken: 1}} },
		Step: func(state, input, _ any) []any {
			op := input.(*history.Op)
			if m.holderKeys[op.Key] {
				hs, ok := state.(holdersState)
				if !ok { // the initial state, the same for every partition
					ls := state.(lockState)
					hs = holdersState{MinToken: ls.MinToken, Floor: ls.Floor}
				}
				next := m.stepHolders(hs, op)
				out := make([]any, len(next))
				for i, s := range next {
					out[i] = s
				}
				return out
			}
			next := m.step(state.(lockState), op)
			out := make([]any, len(next))
			for i, s := range next {
				out[i] = s
			}
			return out
		},
		Hash: hashState,
		DescribeOperation: func(input, _ any) string {
			return input.(*history.Op).String()
		},
		DescribeState: func(state any) string { return fmt.Sprint(state) },
	}
	return nm.ToModel()
}
