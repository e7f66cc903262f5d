package core_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/ticketd/ticketd/core"
)

// TestRenewBatchApply checks one RenewBatch against the command table: each
// session renewal is a KeepAliveSession and each lock renewal a Renew at the
// entry's index, unknown ones NotFound, and nothing else changes.
func TestRenewBatchApply(t *testing.T) {
	t.Parallel()
	sm := core.NewStateMachine()
	apply := func(index uint64, cmd core.Command) core.Result {
		t.Helper()
		res, err := sm.Apply(index, cmd)
		require.NoError(t, err)
		return res
	}
	s1 := apply(1, core.CreateSession(5000)).Session
	s2 := apply(2, core.CreateSession(7000)).Session
	a := apply(3, core.Grant("a", 1000, "o1")).Token
	b := apply(4, core.Grant("b", 1000, "o1").WithSession(s2)).Token
	c := apply(5, core.Grant("c", 2000, "o1")).Token

	cmd := core.RenewBatch([]uint64{s1, 99, s1}, []core.LockRef{{Key: "a", Token: a}, {Key: "a", Token: a + 10}, {Key: "b", Token: b}})
	res := apply(9, cmd)
	require.Equal(t, core.OutcomeRenewed, res.Outcome)
	require.NotNil(t, res.Batch)
	assert.Equal(t, []core.Result{
		{Outcome: core.OutcomeRenewed, LeaseMS: 5000, Session: s1},
		{Outcome: core.OutcomeNotFound},
		{Outcome: core.OutcomeRenewed, LeaseMS: 5000, Session: s1},
	}, res.Batch.Sessions)
	assert.Equal(t, []core.Result{
		{Outcome: core.OutcomeRenewed, LeaseMS: 1000},
		{Outcome: core.OutcomeNotFound},
		{Outcome: core.OutcomeRenewed, LeaseMS: 7000},
	}, res.Batch.Locks)

	sess, _ := sm.Session(s1)
	assert.Equal(t, uint64(9), sess.ModIndex, "session kept alive at the batch's index")
	sess, _ = sm.Session(s2)
	assert.Equal(t, uint64(2), sess.ModIndex, "a session not in the batch is untouched")
	lk, _ := sm.Holder("a", a)
	assert.Equal(t, uint64(9), lk.ModIndex)
	lk, _ = sm.Holder("c", c)
	assert.Equal(t, uint64(5), lk.ModIndex, "a lock not in the batch is untouched")
	assert.Equal(t, uint64(9), sm.AppliedIndex())
	assert.Equal(t, c, sm.LastToken())

	again, err := sm.Apply(9, cmd)
	require.NoError(t, err)
	assert.Equal(t, core.Result{Outcome: core.OutcomeNoop}, again, "a replayed batch changes nothing")

	var got []core.Command
	var results []core.Result
	core.EachRenewal(cmd, res, func(c core.Command, r core.Result) {
		got, results = append(got, c), append(results, r)
	})
	assert.Equal(t, []core.Command{
		core.KeepAliveSession(s1), core.KeepAliveSession(99), core.KeepAliveSession(s1),
		core.Renew("a", a), core.Renew("a", a+10), core.Renew("b", b),
	}, got)
	assert.Equal(t, append(append([]core.Result(nil), res.Batch.Sessions...), res.Batch.Locks...), results)

	var once []core.Command
	core.EachRenewal(core.Renew("a", a), core.Result{Outcome: core.OutcomeRenewed}, func(c core.Command, _ core.Result) { once = append(once, c) })
	assert.Equal(t, []core.Command{core.Renew("a", a)}, once, "any other command is passed through once")
}

// TestApplyRenewBatchWithoutRenewals checks that a RenewBatch Command with no
// Batch (never decoded from an entry) is refused like an unknown op: the
// applied index does not move.
func TestApplyRenewBatchWithoutRenewals(t *testing.T) {
	t.Parallel()
	sm := core.NewStateMachine()
	_, err := sm.Apply(1, core.Command{Op: core.OpRenewBatch})
	require.ErrorIs(t, err, core.ErrDecode)
	assert.Zero(t, sm.AppliedIndex())
}

// drawBatch draws a RenewBatch over sm: sessions among the open ones and
// some unknown ids, locks among the holders and some stale or unknown
// tokens, duplicates included; never empty.
func drawBatch(t *rapid.T, sm *core.StateMachine, sessions []uint64) core.Command {
	ids := append([]uint64{0, sm.AppliedIndex() + 7}, sessions...)
	holders := sm.Range("", "", 0)
	var refs []core.LockRef
	for _, h := range holders {
		refs = append(refs, core.LockRef{Key: h.Key, Token: h.Token})
	}
	for _, k := range propKeys {
		refs = append(refs, core.LockRef{Key: k, Token: drawToken(t, sm, k)})
	}
	ns := rapid.IntRange(0, 4).Draw(t, "batch_sessions")
	nl := rapid.IntRange(0, 4).Draw(t, "batch_locks")
	if ns+nl == 0 {
		nl = 1
	}
	var bs []uint64
	for range ns {
		bs = append(bs, rapid.SampledFrom(ids).Draw(t, "batch_session"))
	}
	var bl []core.LockRef
	for range nl {
		bl = append(bl, rapid.SampledFrom(refs).Draw(t, "batch_lock"))
	}
	return core.RenewBatch(bs, bl)
}

// restored returns a state machine restored from snapshot bytes.
func restored(t *rapid.T, data []byte) *core.StateMachine {
	sm := core.NewStateMachine()
	if err := sm.Restore(bytes.NewReader(data)); err != nil {
		t.Fatalf("restore: %v", err)
	}
	return sm
}

// TestPropRenewBatch: over random histories of grants (some under sessions),
// releases, expiries, renewals and session keep-alives, a RenewBatch at
// index i
//   - gives, for each renewal, the Result its KeepAliveSession or Renew alone
//     gives at i on the same table, and EachRenewal hands out exactly those;
//   - changes nothing but the ModIndex (to i) of the sessions and holders
//     renewed, and the applied index;
//   - is deterministic (two machines agree on results and snapshot bytes),
//     survives Encode and Decode unchanged, and is a no-op when replayed.
func TestPropRenewBatch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := core.NewStateMachine(), core.NewStateMachine()
		var sessions []uint64
		for i := range rapid.IntRange(1, 80).Draw(t, "steps") {
			index := a.AppliedIndex() + 1
			var cmd core.Command
			switch rapid.IntRange(0, 5).Draw(t, "kind") {
			case 0:
				cmd = core.CreateSession(rapid.SampledFrom([]int64{1000, 3000}).Draw(t, "ttl_ms"))
			case 1:
				if len(sessions) == 0 {
					continue
				}
				key := rapid.SampledFrom(propKeys).Draw(t, "key")
				cmd = core.Grant(key, 1000, rapid.SampledFrom(propOwners).Draw(t, "owner")).
					WithSession(rapid.SampledFrom(sessions).Draw(t, "session"))
			case 2, 3:
				index, cmd = drawEntry(t, a)
			default:
				cmd = drawBatch(t, a, sessions)
				if rapid.IntRange(0, 9).Draw(t, "replay") == 0 {
					index = rapid.Uint64Range(0, a.AppliedIndex()).Draw(t, "replay_index")
				}
			}
			pre := mustSnapshot(t, a)
			ra, rb := mustApply(t, a, index, cmd), mustApply(t, b, index, cmd)
			if !reflect.DeepEqual(ra, rb) {
				t.Fatalf("step %d %+v: results differ: %+v vs %+v", i, cmd, ra, rb)
			}
			post := mustSnapshot(t, a)
			if !bytes.Equal(post, mustSnapshot(t, b)) {
				t.Fatalf("step %d: snapshots differ", i)
			}
			if ra.Outcome == core.OutcomeSessionCreated {
				sessions = append(sessions, ra.Session)
			}
			if cmd.Op != core.OpRenewBatch {
				continue
			}
			checkRenewBatch(t, i, index, cmd, ra, pre, post, a)
		}
	})
}

// checkRenewBatch checks one applied RenewBatch cmd at index with Result
// res, on a table whose snapshot was pre before and post after (sm).
func checkRenewBatch(t *rapid.T, step int, index uint64, cmd core.Command, res core.Result, pre, post []byte, sm *core.StateMachine) {
	data, err := core.Encode(cmd)
	if err != nil {
		t.Fatalf("step %d: encode %+v: %v", step, cmd, err)
	}
	if data[0] != core.CommandVersion4 {
		t.Fatalf("step %d: a RenewBatch encoded with version %d", step, data[0])
	}
	if back, err := core.Decode(data); err != nil || !reflect.DeepEqual(back, cmd) {
		t.Fatalf("step %d: decode %+v = %+v, %v", step, cmd, back, err)
	}
	before := restored(t, pre)
	if index <= before.AppliedIndex() {
		if res != (core.Result{Outcome: core.OutcomeNoop}) || !bytes.Equal(pre, post) {
			t.Fatalf("step %d: replayed batch at %d changed something: %+v", step, index, res)
		}
		return
	}
	// Each renewal alone, at the same index, on the table as it was.
	var items []core.Command
	var got []core.Result
	core.EachRenewal(cmd, res, func(c core.Command, r core.Result) { items, got = append(items, c), append(got, r) })
	if len(items) != cmd.Batch.Len() {
		t.Fatalf("step %d: EachRenewal gave %d renewals of %d", step, len(items), cmd.Batch.Len())
	}
	renewedLocks := map[core.LockRef]bool{}
	renewedSessions := map[uint64]bool{}
	for k, item := range items {
		alone := mustApply(t, restored(t, pre), index, item)
		if alone != got[k] {
			t.Fatalf("step %d: renewal %d %+v: batch gave %+v, alone %+v", step, k, item, got[k], alone)
		}
		if alone.Outcome == core.OutcomeRenewed {
			if item.Op == core.OpKeepAliveSession {
				renewedSessions[item.Session] = true
			} else {
				renewedLocks[core.LockRef{Key: item.Key, Token: item.Token}] = true
			}
		}
	}
	// The table after is the table before with those ModIndexes moved.
	if sm.AppliedIndex() != index || sm.LastToken() != before.LastToken() || sm.HolderLen() != before.HolderLen() ||
		sm.Len() != before.Len() || sm.SessionLen() != before.SessionLen() {
		t.Fatalf("step %d: the batch changed more than ModIndexes", step)
	}
	before.Ascend(func(l core.Lock) bool {
		want := l
		if renewedLocks[core.LockRef{Key: l.Key, Token: l.Token}] {
			want.ModIndex = index
		}
		if now, ok := sm.Holder(l.Key, l.Token); !ok || now != want {
			t.Fatalf("step %d: holder %s/%d is %+v, want %+v", step, l.Key, l.Token, now, want)
		}
		return true
	})
	before.AscendSessions(func(s core.Session) bool {
		want := s
		if renewedSessions[s.ID] {
			want.ModIndex = index
		}
		if now, ok := sm.Session(s.ID); !ok || now != want {
			t.Fatalf("step %d: session %d is %+v, want %+v", step, s.ID, now, want)
		}
		return true
	})
}
