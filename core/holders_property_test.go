package core_test

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/ticketd/ticketd/core"
)

// The properties of shared keys, semaphores and sessions
// (docs/semantics.md#shared-locks-semaphores-and-sessions). Their
// generator mixes every kind of Grant on a tiny key space, so that modes
// clash, semaphores fill up, limits disagree and sessions end with locks on
// keys that others hold too.

var holderOwners = []string{"o1", "o2", "o3", "o4", "o5"}

// grantKind is the mode and limit of a generated Grant.
type grantKind struct {
	mode  core.Mode
	limit uint32
}

var grantKinds = []grantKind{
	{core.ModeExclusive, 0}, {core.ModeShared, 0}, {core.ModeShared, 0},
	{core.ModeExclusive, 1}, {core.ModeExclusive, 2}, {core.ModeExclusive, 3},
}

// allHolders returns every holder of sm in key and token order.
func allHolders(sm *core.StateMachine) []core.Lock {
	var out []core.Lock
	sm.Ascend(func(l core.Lock) bool {
		out = append(out, l)
		return true
	})
	return out
}

// sessionIDs returns the open sessions' ids.
func sessionIDs(sm *core.StateMachine) []uint64 {
	var ids []uint64
	sm.AscendSessions(func(s core.Session) bool {
		ids = append(ids, s.ID)
		return true
	})
	return ids
}

// drawSession picks an open session (usually), or an unknown id or 0.
func drawSession(t *rapid.T, sm *core.StateMachine) uint64 {
	ids := sessionIDs(sm)
	if len(ids) > 0 && rapid.IntRange(0, 3).Draw(t, "session_kind") > 0 {
		return rapid.SampledFrom(ids).Draw(t, "session")
	}
	return rapid.Uint64Range(0, sm.AppliedIndex()+1).Draw(t, "session_id")
}

// drawHolderToken picks the token of a holder of key (usually) or any token.
func drawHolderToken(t *rapid.T, sm *core.StateMachine, key string) uint64 {
	if hs := sm.Holders(key); len(hs) > 0 && rapid.IntRange(0, 3).Draw(t, "token_kind") > 0 {
		return rapid.SampledFrom(hs).Draw(t, "holder").Token
	}
	return rapid.Uint64Range(0, sm.LastToken()+1).Draw(t, "token")
}

// drawHolderCommand draws any command on holders: exclusive, shared and
// semaphore grants, sessions and their ends.
func drawHolderCommand(t *rapid.T, sm *core.StateMachine) core.Command {
	key := rapid.SampledFrom(propKeys).Draw(t, "key")
	switch rapid.IntRange(0, 15).Draw(t, "op") {
	case 0, 1, 2, 3, 4, 5:
		k := rapid.SampledFrom(grantKinds).Draw(t, "kind")
		c := core.Grant(key, 1000, rapid.SampledFrom(holderOwners).Draw(t, "owner")).
			WithMode(k.mode).WithLimit(k.limit).
			WithLockDelay(rapid.SampledFrom(propDelays).Draw(t, "lock_delay_ms"))
		if rapid.Bool().Draw(t, "under_session") {
			c = c.WithSession(drawSession(t, sm))
		}
		return c
	case 6, 7:
		return core.Release(key, drawHolderToken(t, sm, key))
	case 8:
		return core.Renew(key, drawHolderToken(t, sm, key))
	case 9:
		return core.ExpireSeen(key, drawHolderToken(t, sm, key), rapid.Uint64Range(0, sm.AppliedIndex()).Draw(t, "seen"))
	case 10, 11:
		return core.CreateSession(rapid.SampledFrom([]int64{1000, 3000}).Draw(t, "ttl_ms"))
	case 12:
		return core.KeepAliveSession(drawSession(t, sm))
	case 13:
		return core.CloseSession(drawSession(t, sm))
	case 14:
		return core.ExpireSession(drawSession(t, sm), rapid.Uint64Range(0, sm.AppliedIndex()).Draw(t, "seen"))
	}
	return core.Noop()
}

// applyNext applies a drawn command at the next index.
func applyNext(t *rapid.T, sm *core.StateMachine) (uint64, core.Command, core.Result) {
	index := sm.AppliedIndex() + 1
	cmd := drawHolderCommand(t, sm)
	return index, cmd, mustApply(t, sm, index, cmd)
}

// TestPropHoldersWithinLimit: a key never has more holders than it admits
// (one for an exclusive lock, limit for a semaphore), never an exclusive
// holder beside any other, and all its holders agree on its mode and limit;
// Len counts keys and HolderLen holders; a key is never held and delayed.
func TestPropHoldersWithinLimit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sm := core.NewStateMachine()
		for i := range rapid.IntRange(0, 200).Draw(t, "steps") {
			_, cmd, res := applyNext(t, sm)
			keys, holders := 0, 0
			for _, k := range propKeys {
				hs := sm.Holders(k)
				holders += len(hs)
				if len(hs) == 0 {
					continue
				}
				keys++
				first := hs[0]
				for _, h := range hs {
					if h.Mode != first.Mode || h.Limit != first.Limit {
						t.Fatalf("step %d %+v (%+v): holders of %q disagree: %+v", i, cmd, res, k, hs)
					}
				}
				switch {
				case first.Limit > 0 && len(hs) > int(first.Limit):
					t.Fatalf("step %d: %q has %d holders, limit %d", i, k, len(hs), first.Limit)
				case first.Limit == 0 && first.Mode == core.ModeExclusive && len(hs) > 1:
					t.Fatalf("step %d %+v: exclusive holder beside others on %q: %+v", i, cmd, k, hs)
				case first.Limit > 0 && first.Mode != core.ModeExclusive:
					t.Fatalf("step %d: semaphore %q has mode %v", i, k, first.Mode)
				}
				if _, delayed := sm.LockDelay(k); delayed {
					t.Fatalf("step %d: %q is held and delayed", i, k)
				}
			}
			if sm.Len() != keys || sm.HolderLen() != holders {
				t.Fatalf("step %d: Len %d HolderLen %d, want %d and %d", i, sm.Len(), sm.HolderLen(), keys, holders)
			}
		}
	})
}

// TestPropHolderTokensIncrease: every new holder gets LastToken()+1, from
// the one counter of all keys and modes; nothing else moves LastToken; all
// holders' tokens are distinct, at most LastToken, and a key's holders come
// in token order.
func TestPropHolderTokensIncrease(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sm := core.NewStateMachine()
		for i := range rapid.IntRange(0, 200).Draw(t, "steps") {
			before := sm.LastToken()
			_, cmd, res := applyNext(t, sm)
			created := res.Outcome == core.OutcomeGranted && res.Created
			switch {
			case created && (res.Token != before+1 || sm.LastToken() != before+1):
				t.Fatalf("step %d: new holder got token %d, LastToken %d, want %d", i, res.Token, sm.LastToken(), before+1)
			case !created && sm.LastToken() != before:
				t.Fatalf("step %d %+v (%+v): LastToken moved from %d to %d", i, cmd, res, before, sm.LastToken())
			}
			seen := map[uint64]bool{}
			var prev core.Lock
			for j, h := range allHolders(sm) {
				if seen[h.Token] || h.Token == 0 || h.Token > sm.LastToken() {
					t.Fatalf("step %d: token %d repeated or out of range (last %d)", i, h.Token, sm.LastToken())
				}
				if j > 0 && h.Key == prev.Key && h.Token <= prev.Token {
					t.Fatalf("step %d: holders of %q out of token order", i, h.Key)
				}
				seen[h.Token], prev = true, h
			}
		}
	})
}

// TestPropSessionEndRemovesExactlyItsLocks: a CloseSession or ExpireSession
// that ends a session removes exactly the holders under it (and reports
// them), leaves every other holder as it was, records a lock-delay exactly
// for the keys it leaves free whose removed holder asked for one; one that
// does not end a session changes no holder. Every holder under a session
// follows its lease (LeaseMS = the session's TTL) and the session is open.
func TestPropSessionEndRemovesExactlyItsLocks(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sm := core.NewStateMachine()
		for i := range rapid.IntRange(0, 200).Draw(t, "steps") {
			index := sm.AppliedIndex() + 1
			cmd := drawHolderCommand(t, sm)
			before := allHolders(sm)
			under := sm.SessionLocks(cmd.Session)
			res := mustApply(t, sm, index, cmd)
			after := allHolders(sm)
			ending := cmd.Op == core.OpCloseSession || cmd.Op == core.OpExpireSession
			if !ending {
				continue
			}
			if res.Ended == nil {
				if !slices.Equal(before, after) {
					t.Fatalf("step %d: %+v ended nothing (%+v) but changed holders", i, cmd, res)
				}
				continue
			}
			want := slices.DeleteFunc(slices.Clone(before), func(l core.Lock) bool { return l.Session == cmd.Session })
			if !slices.Equal(want, after) || !slices.Equal(under, res.Ended.Locks) {
				t.Fatalf("step %d: %+v: holders %+v → %+v, ended %+v, under it %+v", i, cmd, before, after, res.Ended.Locks, under)
			}
			if _, open := sm.Session(cmd.Session); open {
				t.Fatalf("step %d: session %d still open", i, cmd.Session)
			}
			var wantDelays []core.LockDelay // per key left free: the longest delay of its removed holders
			for _, l := range under {
				n := len(wantDelays)
				switch {
				case len(sm.Holders(l.Key)) > 0 || l.LockDelayMS == 0:
				case n > 0 && wantDelays[n-1].Key == l.Key:
					wantDelays[n-1].LockDelayMS = max(wantDelays[n-1].LockDelayMS, l.LockDelayMS)
				default:
					wantDelays = append(wantDelays, core.LockDelay{Key: l.Key, LockDelayMS: l.LockDelayMS, Index: index})
				}
			}
			if !slices.Equal(wantDelays, res.Ended.Delays) {
				t.Fatalf("step %d: delays %+v, want %+v", i, res.Ended.Delays, wantDelays)
			}
			for _, d := range wantDelays {
				if got, ok := sm.LockDelay(d.Key); !ok || got != d {
					t.Fatalf("step %d: delay of %q is %+v (%t), want %+v", i, d.Key, got, ok, d)
				}
			}
		}
		for _, h := range allHolders(sm) {
			if h.Session == 0 {
				continue
			}
			if s, ok := sm.Session(h.Session); !ok || s.TTLMS != h.LeaseMS {
				t.Fatalf("holder %+v under session %+v (open %t)", h, s, ok)
			}
		}
	})
}

// resultsEqual compares Results, following Ended.
func resultsEqual(a, b core.Result) bool { return reflect.DeepEqual(a, b) }

// TestPropHoldersDeterministic: two state machines fed the same commands,
// one of them snapshotted and restored (into a fresh one) at any point,
// return equal results and write byte-identical snapshots after every entry.
func TestPropHoldersDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		steps := rapid.IntRange(0, 200).Draw(t, "steps")
		cut := rapid.IntRange(0, steps).Draw(t, "cut")
		a, b := core.NewStateMachine(), core.NewStateMachine()
		for i := range steps {
			if i == cut {
				data := mustSnapshot(t, b)
				b = core.NewStateMachine()
				if err := b.Restore(bytes.NewReader(data)); err != nil {
					t.Fatalf("restore at step %d: %v", i, err)
				}
			}
			index := a.AppliedIndex() + 1
			cmd := drawHolderCommand(t, a)
			ra, rb := mustApply(t, a, index, cmd), mustApply(t, b, index, cmd)
			if !resultsEqual(ra, rb) {
				t.Fatalf("step %d %+v: results differ: %+v vs %+v", i, cmd, ra, rb)
			}
			if !bytes.Equal(mustSnapshot(t, a), mustSnapshot(t, b)) {
				t.Fatalf("step %d: snapshots differ", i)
			}
			if !slices.Equal(a.SessionLocks(cmd.Session), b.SessionLocks(cmd.Session)) {
				t.Fatalf("step %d: session index differs after restore", i)
			}
		}
	})
}

// holderModel is a plain reference implementation of the lock table with
// modes, limits and sessions (docs/design.md#replicated-commands), written
// as directly as possible, to check StateMachine against.
type holderModel struct {
	holders   map[string][]core.Lock // in token order
	sessions  map[uint64]core.Session
	delays    map[string]core.LockDelay
	lastToken uint64
}

// info adds a non-plain key's mode, limit and holder count to r.
func (m *holderModel) info(r core.Result, l core.Lock, n int) core.Result {
	if l.Mode != core.ModeExclusive || l.Limit != 0 {
		r.Mode, r.Limit, r.Holders = l.Mode, l.Limit, n
	}
	return r
}

// remove deletes the holder of key with token; it reports the holder, the
// holders left, and the delay recorded if expired.
func (m *holderModel) remove(index uint64, key string, token uint64, expired bool) (core.Lock, int, *core.LockDelay) {
	hs := m.holders[key]
	i := slices.IndexFunc(hs, func(l core.Lock) bool { return l.Token == token })
	h := hs[i]
	hs = slices.Delete(slices.Clone(hs), i, i+1)
	m.holders[key] = hs
	if len(hs) > 0 {
		return h, len(hs), nil
	}
	delete(m.holders, key)
	if !expired || h.LockDelayMS <= 0 {
		return h, 0, nil
	}
	d := core.LockDelay{Key: key, LockDelayMS: h.LockDelayMS, Index: index}
	m.delays[key] = d
	return h, 0, &d
}

func (m *holderModel) find(key string, token uint64) (core.Lock, bool) {
	for _, h := range m.holders[key] {
		if h.Token == token {
			return h, true
		}
	}
	return core.Lock{}, false
}

func (m *holderModel) endSession(index, id uint64) *core.SessionEnd {
	delete(m.sessions, id)
	end := &core.SessionEnd{Locks: []core.Lock{}}
	keys := make([]string, 0, len(m.holders))
	for k := range m.holders {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		var delayMS int64
		for _, h := range slices.Clone(m.holders[k]) {
			if h.Session != id {
				continue
			}
			m.remove(index, k, h.Token, false)
			end.Locks = append(end.Locks, h)
			delayMS = max(delayMS, h.LockDelayMS)
		}
		if _, held := m.holders[k]; !held && delayMS > 0 {
			m.delays[k] = core.LockDelay{Key: k, LockDelayMS: delayMS, Index: index}
			end.Delays = append(end.Delays, m.delays[k])
		}
	}
	return end
}

func (m *holderModel) apply(index uint64, c core.Command) core.Result {
	switch c.Op {
	case core.OpGrant:
		lease := c.LeaseMS
		if c.Session != 0 {
			s, ok := m.sessions[c.Session]
			if !ok || s.Principal != c.Principal {
				return core.Result{Outcome: core.OutcomeSessionNotFound}
			}
			lease = s.TTLMS
		}
		hs := m.holders[c.Key]
		for i, h := range hs {
			if h.Owner == c.Owner && h.Principal == c.Principal {
				h.ModIndex = index
				hs[i] = h
				return m.info(core.Result{Outcome: core.OutcomeGranted, Token: h.Token, LeaseMS: h.LeaseMS, Session: h.Session}, h, len(hs))
			}
		}
		if len(hs) > 0 {
			k := hs[0]
			if k.Limit != c.Limit {
				return core.Result{Outcome: core.OutcomeLimitMismatch, Token: k.Token, Mode: k.Mode, Limit: k.Limit, Holders: len(hs)}
			}
			fits := (k.Limit > 0 && len(hs) < int(k.Limit)) || (k.Limit == 0 && k.Mode == core.ModeShared && c.Mode == core.ModeShared)
			if !fits {
				return m.info(core.Result{Outcome: core.OutcomeGrantRejected, Token: k.Token}, k, len(hs))
			}
		}
		mode := c.Mode
		if c.Limit > 0 {
			mode = core.ModeExclusive
		}
		m.lastToken++
		l := core.Lock{Key: c.Key, Token: m.lastToken, LeaseMS: lease, Owner: c.Owner, ModIndex: index,
			LockDelayMS: c.LockDelayMS, Principal: c.Principal, Mode: mode, Limit: c.Limit, Session: c.Session}
		m.holders[c.Key] = append(slices.Clone(hs), l)
		delete(m.delays, c.Key)
		return m.info(core.Result{Outcome: core.OutcomeGranted, Token: l.Token, LeaseMS: lease, Created: true, Session: c.Session}, l, len(hs)+1)
	case core.OpRelease:
		if _, ok := m.find(c.Key, c.Token); !ok {
			return core.Result{Outcome: core.OutcomeNotFound}
		}
		h, left, _ := m.remove(index, c.Key, c.Token, false)
		return m.info(core.Result{Outcome: core.OutcomeReleased}, h, left)
	case core.OpRenew:
		h, ok := m.find(c.Key, c.Token)
		if !ok {
			return core.Result{Outcome: core.OutcomeNotFound}
		}
		i := slices.Index(m.holders[c.Key], h)
		m.holders[c.Key][i].ModIndex = index
		return core.Result{Outcome: core.OutcomeRenewed, LeaseMS: h.LeaseMS}
	case core.OpExpire:
		h, ok := m.find(c.Key, c.Token)
		if !ok || (c.SeenIndex != 0 && h.ModIndex > c.SeenIndex) {
			return core.Result{Outcome: core.OutcomeExpired}
		}
		_, left, d := m.remove(index, c.Key, c.Token, true)
		r := core.Result{Outcome: core.OutcomeExpired, Existed: true}
		if d != nil {
			r.LockDelayMS = d.LockDelayMS
		}
		return m.info(r, h, left)
	case core.OpCreateSession:
		m.sessions[index] = core.Session{ID: index, TTLMS: c.LeaseMS, ModIndex: index, Principal: c.Principal}
		return core.Result{Outcome: core.OutcomeSessionCreated, Session: index, LeaseMS: c.LeaseMS}
	case core.OpKeepAliveSession:
		s, ok := m.sessions[c.Session]
		if !ok {
			return core.Result{Outcome: core.OutcomeNotFound}
		}
		s.ModIndex = index
		m.sessions[c.Session] = s
		return core.Result{Outcome: core.OutcomeRenewed, LeaseMS: s.TTLMS, Session: s.ID}
	case core.OpCloseSession:
		if _, ok := m.sessions[c.Session]; !ok {
			return core.Result{Outcome: core.OutcomeNotFound}
		}
		return core.Result{Outcome: core.OutcomeReleased, Session: c.Session, Ended: m.endSession(index, c.Session)}
	case core.OpExpireSession:
		s, ok := m.sessions[c.Session]
		if !ok || (c.SeenIndex != 0 && s.ModIndex > c.SeenIndex) {
			return core.Result{Outcome: core.OutcomeExpired}
		}
		return core.Result{Outcome: core.OutcomeExpired, Existed: true, Session: c.Session, Ended: m.endSession(index, c.Session)}
	}
	return core.Result{Outcome: core.OutcomeNoop}
}

// TestPropHoldersMatchModel: StateMachine agrees with holderModel on every
// Result (Ended included) and on every holder, session and delay after
// every entry.
func TestPropHoldersMatchModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sm := core.NewStateMachine()
		m := &holderModel{holders: map[string][]core.Lock{}, sessions: map[uint64]core.Session{}, delays: map[string]core.LockDelay{}}
		for i := range rapid.IntRange(0, 200).Draw(t, "steps") {
			index := sm.AppliedIndex() + 1
			cmd := drawHolderCommand(t, sm)
			got, want := mustApply(t, sm, index, cmd), m.apply(index, cmd)
			if !resultsEqual(got, want) {
				t.Fatalf("step %d %+v: got %+v (%+v), want %+v (%+v)", i, cmd, got, got.Ended, want, want.Ended)
			}
			if sm.LastToken() != m.lastToken || sm.Len() != len(m.holders) || sm.SessionLen() != len(m.sessions) {
				t.Fatalf("step %d: last_token/keys/sessions %d/%d/%d, want %d/%d/%d", i,
					sm.LastToken(), sm.Len(), sm.SessionLen(), m.lastToken, len(m.holders), len(m.sessions))
			}
			for _, k := range propKeys {
				if hs := sm.Holders(k); !slices.Equal(hs, m.holders[k]) {
					t.Fatalf("step %d: holders of %q %+v, want %+v", i, k, hs, m.holders[k])
				}
				d, ok := sm.LockDelay(k)
				md, mok := m.delays[k]
				if ok != mok || d != md {
					t.Fatalf("step %d: delay %q is %+v (%t), want %+v (%t)", i, k, d, ok, md, mok)
				}
			}
			byPrincipal := map[string]int{"": 0}
			for id, s := range m.sessions {
				if got, ok := sm.Session(id); !ok || got != s {
					t.Fatalf("step %d: session %d is %+v (%t), want %+v", i, id, got, ok, s)
				}
				byPrincipal[s.Principal]++
			}
			for p, n := range byPrincipal {
				if got := sm.PrincipalSessions(p); got != n {
					t.Fatalf("step %d: principal %q has %d sessions, want %d", i, p, got, n)
				}
			}
		}
	})
}
