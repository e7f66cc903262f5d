package lessor

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ticketd/ticketd/core"
)

// The direct load of a restored table into a lessor that tracks nothing
// (load) must leave exactly the state the comparison with the table (diff)
// leaves when it starts from nothing: the same leases with the same
// deadlines, seen indexes and heap membership, the same holders under each
// session and the same lock-delays (docs/design.md#leases).

// stillClock is a Clock stopped at one instant whose timers never fire: the
// expiry loop of a lessor on it never finds a lease or delay due while a
// test compares its state.
type stillClock struct{ now time.Time }

func (c stillClock) Now() time.Time               { return c.now }
func (c stillClock) NewTimer(time.Duration) Timer { return stillTimer{} }

// stillTimer never fires.
type stillTimer struct{}

func (stillTimer) C() <-chan time.Time { return nil }
func (stillTimer) Stop() bool          { return true }

// newStillLessor returns a lessor on clock whose earlier run applied the
// indexes of applied at their times (Config.AppliedAt); t is a *testing.T
// or a *rapid.T.
func newStillLessor(t interface{ Fatal(...any) }, clock stillClock, applied map[uint64]time.Time) *Lessor {
	l, err := New(Config{
		Clock:         clock,
		Confirm:       func(context.Context) (uint64, error) { return 0, context.Canceled },
		Expire:        func(context.Context, string, uint64, uint64) error { return nil },
		ExpireSession: func(context.Context, uint64, uint64) error { return nil },
		AppliedAt: func(index uint64) (time.Time, bool) {
			at, ok := applied[index]
			return at, ok
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// leaseState is what a lessor holds of one lease, without its heap position.
type leaseState struct {
	leaseMS          int64
	deadline, due    time.Time
	seen             uint64
	expiring, queued bool
}

// lessorState is everything Reconcile sets, in comparable form.
type lessorState struct {
	leases   map[leaseID]leaseState
	sessions int
	under    map[lockID]uint64
	members  map[uint64]map[lockID]struct{}
	delays   map[string]time.Time
	marked   int
}

// stateOf reads l's state and checks that its heaps are heaps whose
// elements know their places and hold exactly the unmarked leases and the
// delays.
func stateOf(t *rapid.T, l *Lessor) lessorState {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := lessorState{
		leases: map[leaseID]leaseState{}, sessions: l.sessions, under: map[lockID]uint64{},
		members: map[uint64]map[lockID]struct{}{}, delays: map[string]time.Time{}, marked: len(l.marked),
	}
	for id, it := range l.items.all() {
		if it.id != id {
			t.Fatalf("lease %+v filed under %+v", it.id, id)
		}
		queued := it.index >= 0
		if queued && (int(it.index) >= len(l.due) || l.due[it.index] != it) {
			t.Fatalf("lease %+v says heap place %d, which holds another", id, it.index)
		}
		st.leases[id] = leaseState{it.leaseMS, l.at(it.deadline), l.at(it.due), it.seen, it.expiring, queued}
	}
	if len(l.due) != l.items.len()-len(l.marked) {
		t.Fatalf("deadline heap holds %d leases, %d tracked and %d marked", len(l.due), l.items.len(), len(l.marked))
	}
	for i := range l.due {
		if i > 0 && l.due.Less(i, (i-1)/2) {
			t.Fatalf("deadline heap out of order at %d", i)
		}
	}
	for h, s := range l.under {
		st.under[h] = s
	}
	for s, m := range l.members {
		st.members[s] = map[lockID]struct{}{}
		for h := range m {
			st.members[s][h] = struct{}{}
		}
	}
	for key, d := range l.delays {
		if d.index >= len(l.ends) || l.ends[d.index] != d {
			t.Fatalf("delay of %q says heap place %d, which holds another", key, d.index)
		}
		st.delays[key] = d.end
	}
	if len(l.ends) != len(l.delays) {
		t.Fatalf("delay heap holds %d, %d timed", len(l.ends), len(l.delays))
	}
	for i := range l.ends {
		if i > 0 && l.ends.Less(i, (i-1)/2) {
			t.Fatalf("delay heap out of order at %d", i)
		}
	}
	return st
}

// drawTable applies random commands to a new state machine — grants of
// every kind, on their own and under sessions, with lock-delays; renewals,
// releases, expiries, sessions and their ends, and gaps in the indexes —
// and, if drawn, restores it from its own snapshot (a restart's table).
func drawTable(t *rapid.T) *core.StateMachine {
	sm := core.NewStateMachine()
	keys := []string{"a", "b", "c", "d", "e", "f"}
	var sessions []uint64
	tokens := map[string][]uint64{}
	pick := func(label string, from []uint64) uint64 {
		if len(from) == 0 || rapid.IntRange(0, 4).Draw(t, label+"_kind") == 0 {
			return rapid.Uint64Range(0, sm.AppliedIndex()+1).Draw(t, label+"_any")
		}
		return rapid.SampledFrom(from).Draw(t, label)
	}
	index := uint64(0)
	for range rapid.IntRange(0, 120).Draw(t, "steps") {
		index += rapid.Uint64Range(1, 3).Draw(t, "gap") // a no-op or configuration entry never applies
		key := rapid.SampledFrom(keys).Draw(t, "key")
		var cmd core.Command
		switch rapid.IntRange(0, 11).Draw(t, "op") {
		case 0, 1, 2, 3:
			cmd = core.Grant(key, rapid.SampledFrom([]int64{1000, 5000, 60_000}).Draw(t, "lease_ms"),
				rapid.SampledFrom([]string{"o1", "o2", "o3"}).Draw(t, "owner")).
				WithLockDelay(rapid.SampledFrom([]int64{0, 0, 300, 2000}).Draw(t, "lock_delay_ms"))
			switch rapid.IntRange(0, 3).Draw(t, "mode") {
			case 1:
				cmd = cmd.WithMode(core.ModeShared)
			case 2:
				cmd = cmd.WithLimit(3)
			}
			if rapid.IntRange(0, 2).Draw(t, "under_session") == 0 {
				cmd.LeaseMS = 0
				cmd = cmd.WithSession(pick("session", sessions))
			}
		case 4:
			cmd = core.Renew(key, pick("token", tokens[key]))
		case 5:
			cmd = core.Release(key, pick("token", tokens[key]))
		case 6, 7:
			cmd = core.ExpireSeen(key, pick("token", tokens[key]), rapid.Uint64Range(0, index).Draw(t, "seen"))
		case 8:
			cmd = core.CreateSession(rapid.SampledFrom([]int64{1000, 30_000}).Draw(t, "ttl_ms"))
		case 9:
			cmd = core.KeepAliveSession(pick("session", sessions))
		case 10:
			cmd = core.CloseSession(pick("session", sessions))
		case 11:
			cmd = core.ExpireSession(pick("session", sessions), rapid.Uint64Range(0, index).Draw(t, "seen"))
		}
		res, err := sm.Apply(index, cmd)
		if err != nil {
			t.Fatalf("apply %+v at %d: %v", cmd, index, err)
		}
		switch {
		case res.Outcome == core.OutcomeSessionCreated:
			sessions = append(sessions, res.Session)
		case cmd.Op == core.OpGrant && res.Outcome == core.OutcomeGranted:
			tokens[key] = append(tokens[key], res.Token)
		}
	}
	if rapid.Bool().Draw(t, "restored") {
		var buf bytes.Buffer
		if err := sm.WriteSnapshot(&buf); err != nil {
			t.Fatal(err)
		}
		restored := core.NewStateMachine()
		if err := restored.Restore(&buf); err != nil {
			t.Fatal(err)
		}
		return restored
	}
	return sm
}

// drawAppliedAt draws when an earlier run of the node applied some of the
// indexes up to last: before now (used), or after it (never used).
func drawAppliedAt(t *rapid.T, clock stillClock, last uint64) map[uint64]time.Time {
	at := map[uint64]time.Time{}
	for i := uint64(1); i <= last; i++ {
		if rapid.Bool().Draw(t, fmt.Sprintf("recorded_%d", i)) {
			at[i] = clock.now.Add(time.Duration(rapid.IntRange(-70_000, 1000).Draw(t, fmt.Sprintf("at_%d", i))) * time.Millisecond)
		}
	}
	return at
}

// TestPropLoadIsDiffFromNothing: on random tables (fresh and restored from
// a snapshot, with leases an earlier run applied at random times), the
// direct load and the diff into an empty lessor end in the same state, and
// that state times every holder of the table: holders under a session by
// their session, the others on their own.
func TestPropLoadIsDiffFromNothing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sm := drawTable(t)
		clock := stillClock{now: time.Now().Add(time.Hour)}
		applied := drawAppliedAt(t, clock, sm.AppliedIndex())
		loaded, diffed := newStillLessor(t, clock, applied), newStillLessor(t, clock, applied)
		defer func() { _ = loaded.Close() }()
		defer func() { _ = diffed.Close() }()

		loaded.mu.Lock()
		loaded.load(sm, clock.now)
		loaded.mu.Unlock()
		diffed.mu.Lock()
		diffed.diff(sm, clock.now)
		diffed.mu.Unlock()

		got, want := stateOf(t, loaded), stateOf(t, diffed)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("load:\n%+v\ndiff from nothing:\n%+v", got, want)
		}
		holders := 0
		sm.Ascend(func(lk core.Lock) bool {
			holders++
			if lk.Session != 0 {
				if got.under[lockID{lk.Key, lk.Token}] != lk.Session {
					t.Fatalf("holder %q/%d not under its session %d", lk.Key, lk.Token, lk.Session)
				}
				return true
			}
			if _, ok := got.leases[lockLease(lk.Key, lk.Token)]; !ok {
				t.Fatalf("holder %q/%d not timed", lk.Key, lk.Token)
			}
			return true
		})
		if n := loaded.Len(); n != holders {
			t.Fatalf("Len %d, the table holds %d", n, holders)
		}
		if n := loaded.Sessions(); n != sm.SessionLen() {
			t.Fatalf("Sessions %d, the table has %d", n, sm.SessionLen())
		}
	})
}

// TestReconcileLoadsOnlyWhenEmpty: Reconcile into a lessor that tracks
// nothing is a direct load, with no comparison (Loads); into one that
// tracks a lease, a holder under a session or a lock-delay it compares.
func TestReconcileLoadsOnlyWhenEmpty(t *testing.T) {
	clock := stillClock{now: time.Now().Add(time.Hour)}
	sm := core.NewStateMachine()
	for i, cmd := range []core.Command{
		core.Grant("a", 1000, "o"), core.CreateSession(1000), core.Grant("b", 0, "o").WithSession(2),
		core.Grant("c", 1000, "o").WithLockDelay(500), core.Expire("c", 3),
	} {
		if _, err := sm.Apply(uint64(i+1), cmd); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		before func(l *Lessor)
		loads  uint64
	}{
		{"empty", func(*Lessor) {}, 1},
		{"a lease", func(l *Lessor) { l.Track("z", 9, 1000, 1) }, 0},
		{"a holder under a session", func(l *Lessor) { l.TrackUnder("z", 9, 2) }, 0},
		{"a lock-delay", func(l *Lessor) { l.Delay("z", 100) }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newStillLessor(t, clock, nil)
			defer func() { _ = l.Close() }()
			tc.before(l)
			l.Reconcile(sm)
			if l.Reconciles() != 1 || l.Loads() != tc.loads {
				t.Fatalf("reconciles %d, loads %d; want 1 and %d", l.Reconciles(), l.Loads(), tc.loads)
			}
			if l.Len() != 2 || l.Sessions() != 1 || l.Delayed("c") != 500*time.Millisecond {
				t.Fatalf("after Reconcile: %d holders, %d sessions, delay of c %v; want 2, 1, 500ms", l.Len(), l.Sessions(), l.Delayed("c"))
			}
		})
	}
}
