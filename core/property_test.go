package core_test

import (
	"bytes"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/ticketd/ticketd/core"
)

// The key, owner and member spaces are tiny so that random sequences collide:
// grants on held keys, releases of stale tokens, expiries after re-grants.
var (
	propKeys    = []string{"a", "b", "c"}
	propOwners  = []string{"o1", "o2", "o3"}
	propMembers = []string{"n1", "n2"}
	propAddrs   = []string{"", "127.0.0.1:7001", "127.0.0.1:7002"}
	// Mostly "" (authorization off), sometimes a principal, so that the same
	// owner under another principal comes up.
	propPrincipals = []string{"", "", "p1"}
	propDelays     = []int64{0, 0, 500}
)

// drawToken picks a token for a Release or Expire on key: often the holder's
// (so locks do get removed), sometimes a stale, future or zero one.
func drawToken(t *rapid.T, sm *core.StateMachine, key string) uint64 {
	held, ok := sm.Get(key)
	switch rapid.IntRange(0, 3).Draw(t, "token_kind") {
	case 0, 1:
		if ok {
			return held.Token
		}
	case 2:
		return sm.LastToken()
	}
	return rapid.Uint64Range(0, sm.LastToken()+2).Draw(t, "token")
}

// drawSeen picks the seen index of an ExpireSeen on key: 0 (unconditional),
// the holder's ModIndex, one below it (a renewal won the race), or any index
// up to one past AppliedIndex.
func drawSeen(t *rapid.T, sm *core.StateMachine, key string) uint64 {
	held, ok := sm.Get(key)
	switch rapid.IntRange(0, 3).Draw(t, "seen_kind") {
	case 0:
		return 0
	case 1:
		if ok {
			return held.ModIndex
		}
	case 2:
		if ok && held.ModIndex > 1 {
			return held.ModIndex - 1
		}
	}
	return rapid.Uint64Range(0, sm.AppliedIndex()+1).Draw(t, "seen")
}

// drawCommand draws any command, with tokens chosen with sm's state in view.
func drawCommand(t *rapid.T, sm *core.StateMachine) core.Command {
	key := rapid.SampledFrom(propKeys).Draw(t, "key")
	switch rapid.IntRange(0, 13).Draw(t, "op") {
	case 0, 1, 2, 3:
		lease := rapid.SampledFrom([]int64{1000, 2000}).Draw(t, "lease_ms")
		return core.Grant(key, lease, rapid.SampledFrom(propOwners).Draw(t, "owner")).
			WithLockDelay(rapid.SampledFrom(propDelays).Draw(t, "lock_delay_ms")).
			WithPrincipal(rapid.SampledFrom(propPrincipals).Draw(t, "principal"))
	case 4, 5:
		return core.Release(key, drawToken(t, sm, key))
	case 6, 7:
		return core.Expire(key, drawToken(t, sm, key))
	case 8, 9:
		return core.ExpireSeen(key, drawToken(t, sm, key), drawSeen(t, sm, key))
	case 10, 11:
		return core.Renew(key, drawToken(t, sm, key))
	case 12:
		return core.Noop()
	}
	return core.SetMember(rapid.SampledFrom(propMembers).Draw(t, "member"), rapid.SampledFrom(propAddrs).Draw(t, "addr"))
}

// drawEntry draws the next log entry for sm: usually the next index, sometimes
// after a gap, and sometimes a replay of an index at or below AppliedIndex.
func drawEntry(t *rapid.T, sm *core.StateMachine) (uint64, core.Command) {
	applied := sm.AppliedIndex()
	index := applied + 1
	switch rapid.IntRange(0, 9).Draw(t, "index_kind") {
	case 0:
		index = rapid.Uint64Range(0, applied).Draw(t, "replay_index")
	case 1:
		index = applied + rapid.Uint64Range(2, 4).Draw(t, "gap")
	}
	return index, drawCommand(t, sm)
}

func mustApply(t *rapid.T, sm *core.StateMachine, index uint64, cmd core.Command) core.Result {
	res, err := sm.Apply(index, cmd)
	if err != nil {
		t.Fatalf("apply %d %+v: %v", index, cmd, err)
	}
	return res
}

func mustSnapshot(t *rapid.T, sm *core.StateMachine) []byte {
	var buf bytes.Buffer
	if err := sm.WriteSnapshot(&buf); err != nil {
		t.Fatalf("write snapshot: %v", err)
	}
	return buf.Bytes()
}

// TestPropDeterministic: two state machines fed the same sequence return the
// same results and write byte-identical snapshots after every entry.
func TestPropDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := core.NewStateMachine(), core.NewStateMachine()
		for i := range rapid.IntRange(0, 150).Draw(t, "steps") {
			index, cmd := drawEntry(t, a)
			ra, rb := mustApply(t, a, index, cmd), mustApply(t, b, index, cmd)
			if ra != rb {
				t.Fatalf("step %d %+v: results differ: %+v vs %+v", i, cmd, ra, rb)
			}
			if !bytes.Equal(mustSnapshot(t, a), mustSnapshot(t, b)) {
				t.Fatalf("step %d: snapshots differ", i)
			}
		}
	})
}

// TestPropSnapshotRestoreContinue: snapshot, restore into a fresh state
// machine at any point, then continue: the results and the final snapshot
// bytes equal those of the uninterrupted run.
func TestPropSnapshotRestoreContinue(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		steps := rapid.IntRange(0, 150).Draw(t, "steps")
		cut := rapid.IntRange(0, steps).Draw(t, "cut")
		whole, part := core.NewStateMachine(), core.NewStateMachine()
		for i := range steps {
			if i == cut {
				data := mustSnapshot(t, part)
				part = core.NewStateMachine()
				if err := part.Restore(bytes.NewReader(data)); err != nil {
					t.Fatalf("restore at step %d: %v", i, err)
				}
				if !bytes.Equal(data, mustSnapshot(t, part)) {
					t.Fatalf("snapshot → restore → snapshot changed the bytes at step %d", i)
				}
			}
			index, cmd := drawEntry(t, whole)
			rw, rp := mustApply(t, whole, index, cmd), mustApply(t, part, index, cmd)
			if rw != rp {
				t.Fatalf("step %d %+v: restored run returned %+v, uninterrupted %+v", i, cmd, rp, rw)
			}
		}
		if !bytes.Equal(mustSnapshot(t, whole), mustSnapshot(t, part)) {
			t.Fatalf("final snapshots differ (cut at %d of %d)", cut, steps)
		}
	})
}

// TestPropTokensIncreaseByOne: every new grant (of a free key) gets
// LastToken()+1, nothing else moves LastToken, and LastToken equals the number
// of new grants.
func TestPropTokensIncreaseByOne(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sm := core.NewStateMachine()
		var grants uint64
		for i := range rapid.IntRange(0, 150).Draw(t, "steps") {
			index, cmd := drawEntry(t, sm)
			before := sm.LastToken()
			held, wasHeld := sm.Get(cmd.Key)
			replay := index <= sm.AppliedIndex()
			res := mustApply(t, sm, index, cmd)
			newGrant := cmd.Op == core.OpGrant && !wasHeld && !replay
			switch {
			case newGrant:
				grants++
				if res.Outcome != core.OutcomeGranted || res.Token != before+1 || sm.LastToken() != before+1 {
					t.Fatalf("step %d: new grant got %+v, LastToken %d, want token %d", i, res, sm.LastToken(), before+1)
				}
			case sm.LastToken() != before:
				t.Fatalf("step %d %+v (%+v): LastToken moved from %d to %d", i, cmd, res, before, sm.LastToken())
			case cmd.Op == core.OpGrant && !replay && res.Token != held.Token:
				t.Fatalf("step %d: grant of a held key returned token %d, holder has %d", i, res.Token, held.Token)
			}
			if sm.LastToken() != grants {
				t.Fatalf("step %d: LastToken %d after %d new grants", i, sm.LastToken(), grants)
			}
		}
	})
}

// TestPropOnlyHolderTokenRemoves: a Release or Expire removes a lock exactly
// when its token is the holder's (and, for an Expire with a seen index, the
// lock has not changed since it); otherwise the lock stays as it was.
func TestPropOnlyHolderTokenRemoves(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sm := core.NewStateMachine()
		for i := range rapid.IntRange(0, 150).Draw(t, "steps") {
			index, cmd := drawEntry(t, sm)
			held, wasHeld := sm.Get(cmd.Key)
			replay := index <= sm.AppliedIndex()
			res := mustApply(t, sm, index, cmd)
			if replay || (cmd.Op != core.OpRelease && cmd.Op != core.OpExpire) {
				continue
			}
			after, isHeld := sm.Get(cmd.Key)
			removed := wasHeld && held.Token == cmd.Token &&
				(cmd.Op == core.OpRelease || cmd.SeenIndex == 0 || held.ModIndex <= cmd.SeenIndex)
			if isHeld != (wasHeld && !removed) || (isHeld && after != held) {
				t.Fatalf("step %d %v key=%s token=%d: before %+v (held %t), after %+v (held %t)",
					i, cmd.Op, cmd.Key, cmd.Token, held, wasHeld, after, isHeld)
			}
			want := core.Result{Outcome: core.OutcomeNotFound}
			switch {
			case cmd.Op == core.OpExpire && removed:
				want = core.Result{Outcome: core.OutcomeExpired, Existed: true, LockDelayMS: held.LockDelayMS}
			case cmd.Op == core.OpExpire:
				want = core.Result{Outcome: core.OutcomeExpired}
			case removed:
				want = core.Result{Outcome: core.OutcomeReleased}
			}
			if res != want {
				t.Fatalf("step %d %v: result %+v, want %+v", i, cmd.Op, res, want)
			}
		}
	})
}

// TestPropExpireSeenNeverRemovesNewer: an Expire whose seen index is below
// the lock's ModIndex (a Grant, Renew or retry applied after the leader
// decided) never removes it or changes it, and a Renew or retry Grant always
// moves ModIndex to its own index, so a later ExpireSeen with an older seen
// index cannot win.
func TestPropExpireSeenNeverRemovesNewer(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sm := core.NewStateMachine()
		for i := range rapid.IntRange(0, 150).Draw(t, "steps") {
			index, cmd := drawEntry(t, sm)
			held, wasHeld := sm.Get(cmd.Key)
			replay := index <= sm.AppliedIndex()
			res := mustApply(t, sm, index, cmd)
			after, isHeld := sm.Get(cmd.Key)
			switch {
			case replay || !wasHeld:
			case cmd.Op == core.OpExpire && cmd.SeenIndex != 0 && held.ModIndex > cmd.SeenIndex:
				if !isHeld || after != held || res.Existed {
					t.Fatalf("step %d: expire seen=%d removed or changed %+v (now %+v, %t): %+v", i, cmd.SeenIndex, held, after, isHeld, res)
				}
			case res.Outcome == core.OutcomeRenewed || (res.Outcome == core.OutcomeGranted && !res.Created):
				want := held
				want.ModIndex = index
				if !isHeld || after != want {
					t.Fatalf("step %d: %v of %+v left %+v, want %+v", i, cmd.Op, held, after, want)
				}
			}
		}
	})
}

// TestPropHeldAndDelayedExclusive: a key is never both held and delayed, a
// delay record always comes from the Expire that removed a lock with a
// lock-delay, and a created Grant clears it.
func TestPropHeldAndDelayedExclusive(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sm := core.NewStateMachine()
		for i := range rapid.IntRange(0, 150).Draw(t, "steps") {
			index, cmd := drawEntry(t, sm)
			held, _ := sm.Get(cmd.Key)
			replay := index <= sm.AppliedIndex()
			res := mustApply(t, sm, index, cmd)
			for _, k := range propKeys {
				_, isHeld := sm.Get(k)
				d, delayed := sm.LockDelay(k)
				if isHeld && delayed {
					t.Fatalf("step %d: key %q is held and delayed (%+v)", i, k, d)
				}
			}
			d, delayed := sm.LockDelay(cmd.Key)
			if !replay && res.Outcome == core.OutcomeExpired && res.Existed {
				wantDelayed := held.LockDelayMS > 0
				if delayed != wantDelayed || (delayed && d != (core.LockDelay{Key: cmd.Key, LockDelayMS: held.LockDelayMS, Index: index})) {
					t.Fatalf("step %d: expire of %+v at %d left delay %+v (%t)", i, held, index, d, delayed)
				}
				if res.LockDelayMS != held.LockDelayMS {
					t.Fatalf("step %d: expire result lock_delay_ms %d, lock had %d", i, res.LockDelayMS, held.LockDelayMS)
				}
			}
		}
	})
}

// TestPropReplayIsNoop: applying any command at an index at or below
// AppliedIndex returns Noop and leaves the snapshot bytes unchanged.
func TestPropReplayIsNoop(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sm := core.NewStateMachine()
		for i := range rapid.IntRange(1, 100).Draw(t, "steps") {
			index, cmd := drawEntry(t, sm)
			mustApply(t, sm, index, cmd)
			before := mustSnapshot(t, sm)
			applied := sm.AppliedIndex()
			replayIndex := rapid.Uint64Range(0, applied).Draw(t, "replay_index")
			replayCmd := drawCommand(t, sm)
			if res := mustApply(t, sm, replayIndex, replayCmd); res != (core.Result{Outcome: core.OutcomeNoop}) {
				t.Fatalf("step %d: replay of index %d (applied %d) returned %+v", i, replayIndex, applied, res)
			}
			if !bytes.Equal(before, mustSnapshot(t, sm)) {
				t.Fatalf("step %d: replay of index %d %+v changed the snapshot", i, replayIndex, replayCmd)
			}
		}
	})
}

// model is a plain reference implementation of the command table of docs/design.md#replicated-commands,
// written as directly as possible, to check StateMachine against.
type model struct {
	locks     map[string]core.Lock
	delays    map[string]core.LockDelay
	members   map[string]string
	lastToken uint64
	applied   uint64
}

func (m *model) apply(index uint64, c core.Command) core.Result {
	if index <= m.applied {
		return core.Result{Outcome: core.OutcomeNoop}
	}
	m.applied = index
	held, ok := m.locks[c.Key]
	switch c.Op {
	case core.OpGrant:
		if !ok {
			m.lastToken++
			m.locks[c.Key] = core.Lock{
				Key: c.Key, Token: m.lastToken, LeaseMS: c.LeaseMS, Owner: c.Owner,
				ModIndex: index, LockDelayMS: c.LockDelayMS, Principal: c.Principal,
			}
			delete(m.delays, c.Key)
			return core.Result{Outcome: core.OutcomeGranted, Token: m.lastToken, LeaseMS: c.LeaseMS, Created: true}
		}
		if held.Owner == c.Owner && held.Principal == c.Principal {
			held.ModIndex = index
			m.locks[c.Key] = held
			return core.Result{Outcome: core.OutcomeGranted, Token: held.Token, LeaseMS: held.LeaseMS}
		}
		return core.Result{Outcome: core.OutcomeGrantRejected, Token: held.Token}
	case core.OpRenew:
		if ok && held.Token == c.Token {
			held.ModIndex = index
			m.locks[c.Key] = held
			return core.Result{Outcome: core.OutcomeRenewed, LeaseMS: held.LeaseMS}
		}
		return core.Result{Outcome: core.OutcomeNotFound}
	case core.OpRelease:
		if ok && held.Token == c.Token {
			delete(m.locks, c.Key)
			return core.Result{Outcome: core.OutcomeReleased}
		}
		return core.Result{Outcome: core.OutcomeNotFound}
	case core.OpExpire:
		if ok && held.Token == c.Token && (c.SeenIndex == 0 || held.ModIndex <= c.SeenIndex) {
			delete(m.locks, c.Key)
			if held.LockDelayMS > 0 {
				m.delays[c.Key] = core.LockDelay{Key: c.Key, LockDelayMS: held.LockDelayMS, Index: index}
			}
			return core.Result{Outcome: core.OutcomeExpired, Existed: true, LockDelayMS: held.LockDelayMS}
		}
		return core.Result{Outcome: core.OutcomeExpired}
	case core.OpSetMember:
		if c.APIAddr == "" {
			delete(m.members, c.MemberID)
		} else {
			m.members[c.MemberID] = c.APIAddr
		}
	}
	return core.Result{Outcome: core.OutcomeNoop}
}

// TestPropMatchesModel: StateMachine agrees with the reference model on every
// result and on the whole state after every entry.
func TestPropMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sm := core.NewStateMachine()
		m := &model{locks: map[string]core.Lock{}, delays: map[string]core.LockDelay{}, members: map[string]string{}}
		for i := range rapid.IntRange(0, 150).Draw(t, "steps") {
			index, cmd := drawEntry(t, sm)
			got, want := mustApply(t, sm, index, cmd), m.apply(index, cmd)
			if got != want {
				t.Fatalf("step %d index %d %+v: got %+v, want %+v", i, index, cmd, got, want)
			}
			if sm.LastToken() != m.lastToken || sm.AppliedIndex() != m.applied || sm.Len() != len(m.locks) {
				t.Fatalf("step %d: last_token/applied/len %d/%d/%d, want %d/%d/%d", i,
					sm.LastToken(), sm.AppliedIndex(), sm.Len(), m.lastToken, m.applied, len(m.locks))
			}
			for _, k := range propKeys {
				l, ok := sm.Get(k)
				ml, mok := m.locks[k]
				if ok != mok || l != ml {
					t.Fatalf("step %d: lock %q is %+v (%t), want %+v (%t)", i, k, l, ok, ml, mok)
				}
				d, ok := sm.LockDelay(k)
				md, mok := m.delays[k]
				if ok != mok || d != md {
					t.Fatalf("step %d: delay %q is %+v (%t), want %+v (%t)", i, k, d, ok, md, mok)
				}
			}
			if fmt.Sprint(sm.Members()) != fmt.Sprint(m.members) { // fmt sorts map keys
				t.Fatalf("step %d: members %v, want %v", i, sm.Members(), m.members)
			}
		}
	})
}
