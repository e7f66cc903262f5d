package core_test

import (
	"bytes"
	"maps"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/ticketd/ticketd/core"
)

// lockPrincipals are the principals the tests below bind grants and
// sessions to ("" is a grant made with authorization off).
var lockPrincipals = []string{"alice", "bob", ""}

// principalLockCounts reads PrincipalLocks for each of names.
func principalLockCounts(sm *core.StateMachine, names ...string) map[string]int {
	out := map[string]int{}
	for _, p := range names {
		out[p] = sm.PrincipalLocks(p)
	}
	return out
}

// countedLocks counts sm's holders by principal from the table itself, for
// each of names (0 for a principal that holds nothing).
func countedLocks(sm *core.StateMachine, names ...string) map[string]int {
	out := map[string]int{}
	for _, p := range names {
		out[p] = 0
	}
	sm.Ascend(func(l core.Lock) bool {
		out[l.Principal]++
		return true
	})
	return out
}

// TestPrincipalLocks: the holders per principal (the lock quota's count)
// follow grants of every kind (exclusive, shared, semaphore, under a
// session), an idempotent retry adds nothing, and Release, Expire and a
// session's end take each holder away once; a Grant the table refuses
// counts nothing. The count comes back the same from a snapshot,
// replacing what the restoring state machine counted before, and goes on
// from there.
func TestPrincipalLocks(t *testing.T) {
	sm := core.NewStateMachine()
	applyAll(t, sm,
		core.CreateSession(1000).WithPrincipal("alice"),                              // 1: session 1
		core.Grant("x", 1000, "a1").WithPrincipal("alice"),                           // 2: token 1
		core.Grant("s", 1000, "a2").WithPrincipal("alice").WithMode(core.ModeShared), // 3: token 2
		core.Grant("s", 1000, "b1").WithPrincipal("bob").WithMode(core.ModeShared),   // 4: token 3
		core.Grant("m", 1000, "b2").WithPrincipal("bob").WithLimit(2),                // 5: token 4
		core.Grant("m", 1000, "a3").WithPrincipal("alice").WithLimit(2),              // 6: token 5
		core.Grant("m", 1000, "c").WithPrincipal("bob").WithLimit(2),                 // 7: full: rejected
		core.Grant("x", 1000, "b3").WithPrincipal("bob"),                             // 8: held: rejected
		core.Grant("x", 1000, "a1").WithPrincipal("alice"),                           // 9: retry: same holder
		core.Grant("y", 1000, "a4").WithPrincipal("alice").WithSession(1),            // 10: token 6
		core.Grant("z", 1000, "a5").WithPrincipal("alice").WithSession(1),            // 11: token 7
		core.Grant("w", 1000, "o"),                                                   // 12: token 8, authorization off
		core.Grant("v", 1000, "b4").WithPrincipal("bob").WithSession(1),              // 13: alice's session: refused
	)
	want := map[string]int{"alice": 5, "bob": 2, "": 1}
	require.Equal(t, want, principalLockCounts(sm, lockPrincipals...))
	require.Equal(t, countedLocks(sm, lockPrincipals...), principalLockCounts(sm, lockPrincipals...))

	applyAll(t, sm,
		core.Release("s", 3),       // bob's shared holder
		core.Release("s", 3),       // again: not found, changes nothing
		core.Expire("m", 5),        // alice's semaphore slot
		core.ExpireSeen("x", 1, 1), // renewed by the retry at 9: stays
		core.Renew("w", 8),
	)
	want = map[string]int{"alice": 4, "bob": 1, "": 1}
	require.Equal(t, want, principalLockCounts(sm, lockPrincipals...))

	snap := snapshotBytes(t, sm)
	other := core.NewStateMachine()
	applyAll(t, other,
		core.Grant("q", 1000, "c1").WithPrincipal("carol"),
		core.Grant("x", 1000, "b9").WithPrincipal("bob"),
	)
	require.NoError(t, other.Restore(bytes.NewReader(snap)))
	names := append(lockPrincipals, "carol")
	require.Equal(t, principalLockCounts(sm, names...), principalLockCounts(other, names...), "rebuilt on Restore, not merged")
	require.Equal(t, 0, other.PrincipalLocks("carol"))

	// A session's end removes its two holders; the count goes on alike on
	// both, and never reaches the snapshot bytes.
	cmds := []core.Command{
		core.CloseSession(1),
		core.Grant("s", 1000, "b5").WithPrincipal("bob").WithMode(core.ModeShared),
		core.Release("x", 1),
	}
	applyAll(t, sm, cmds...)
	applyAll(t, other, cmds...)
	want = map[string]int{"alice": 1, "bob": 2, "": 1, "carol": 0}
	require.Equal(t, want, principalLockCounts(sm, names...))
	require.Equal(t, want, principalLockCounts(other, names...))
	require.Equal(t, snapshotBytes(t, sm), snapshotBytes(t, other))
}

// drawPrincipalCommand draws a command of the shared-key, semaphore and
// session world (drawHolderCommand) bound to a principal: a Grant under a
// session is usually bound to that session's principal, so that it applies.
func drawPrincipalCommand(t *rapid.T, sm *core.StateMachine) core.Command {
	cmd := drawHolderCommand(t, sm)
	if cmd.Op != core.OpGrant && cmd.Op != core.OpCreateSession {
		return cmd
	}
	p := rapid.SampledFrom(lockPrincipals).Draw(t, "principal")
	if s, ok := sm.Session(cmd.Session); ok && cmd.Op == core.OpGrant && rapid.IntRange(0, 3).Draw(t, "own_session") > 0 {
		p = s.Principal
	}
	return cmd.WithPrincipal(p)
}

// TestPropPrincipalLocksMatchTable: after every entry, PrincipalLocks of
// each principal is the number of its holders in the table; a state
// machine restored from a snapshot taken at any step (over a table of its
// own) counts the same and keeps counting the same as the original.
func TestPropPrincipalLocksMatchTable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sm := core.NewStateMachine()
		var restored *core.StateMachine
		for i := range rapid.IntRange(0, 200).Draw(t, "steps") {
			index := sm.AppliedIndex() + 1
			cmd := drawPrincipalCommand(t, sm)
			mustApply(t, sm, index, cmd)
			if restored != nil {
				mustApply(t, restored, index, cmd)
			}
			want := countedLocks(sm, lockPrincipals...)
			if got := principalLockCounts(sm, lockPrincipals...); !maps.Equal(got, want) {
				t.Fatalf("step %d %+v: PrincipalLocks %v, table has %v", i, cmd, got, want)
			}
			if restored != nil {
				if got := principalLockCounts(restored, lockPrincipals...); !maps.Equal(got, want) {
					t.Fatalf("step %d %+v: restored PrincipalLocks %v, table has %v", i, cmd, got, want)
				}
			}
			if rapid.IntRange(0, 19).Draw(t, "restore") == 0 {
				restored = core.NewStateMachine()
				mustApply(t, restored, 1, core.Grant("other", 1000, "o").WithPrincipal("alice"))
				if err := restored.Restore(bytes.NewReader(mustSnapshot(t, sm))); err != nil {
					t.Fatalf("step %d: restore: %v", i, err)
				}
			}
		}
	})
}
