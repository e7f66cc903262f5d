package core_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/core/internal/corepb"
)

// v2Fixture is a version 2 snapshot written by WriteTo before version 3
// existed (committed; never regenerate it). Its state, applied in order at
// indexes 1..9: Grant orders/42 (worker-1, 10000 ms), Grant b (o1, principal
// svc), Grant läs/鍵 (owner "", 2500 ms, lock-delay 400), Renew orders/42,
// Grant x (o2, lock-delay 300), ExpireSeen x (seen 5), Release b, SetMember
// n1, Grant a (o3, 3000 ms, lock-delay 900, principal p); then Skip to 11.
const v2Fixture = "testdata/snapshot-v2.bin"

// sessionState returns a state machine with every version 3 feature: a
// shared key with two holders (one under a session), a semaphore, a plain
// exclusive lock, two sessions (one kept alive, one with a principal).
func sessionState(t testing.TB) *core.StateMachine {
	t.Helper()
	sm := core.NewStateMachine()
	applyAll(t, sm,
		core.CreateSession(4000),                                             // 1: session 1
		core.CreateSession(2000).WithPrincipal("svc"),                        // 2: session 2
		core.Grant("r", 1000, "o1").WithMode(core.ModeShared),                // 3: token 1
		core.Grant("r", 1000, "o2").WithMode(core.ModeShared).WithSession(1), // 4: token 2
		core.Grant("s", 1000, "o3").WithLimit(3).WithLockDelay(50),           // 5: token 3
		core.Grant("e", 1000, "o4"),                                          // 6: token 4
		core.KeepAliveSession(1),                                             // 7
	)
	return sm
}

// TestRestoreVersion2Fixture checks the upgrade from version 2: the locks,
// lock-delay record and members come back as plain exclusive holders, the
// state writes back byte for byte as version 2 (it uses nothing newer), and
// it goes on applying version 3 commands.
func TestRestoreVersion2Fixture(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(v2Fixture)
	require.NoError(t, err)
	require.Equal(t, core.SnapshotVersion2, data[0])

	sm := sessionState(t)
	require.NoError(t, sm.Restore(bytes.NewReader(data)))
	a := lock("a", 5, 3000, "o3", 9)
	a.LockDelayMS, a.Principal = 900, "p"
	l := lock("läs/鍵", 3, 2500, "", 3)
	l.LockDelayMS = 400
	require.Equal(t, []core.Lock{a, l, lock("orders/42", 1, 10000, "worker-1", 4)}, locksOf(sm))
	require.Equal(t, []core.LockDelay{{Key: "x", LockDelayMS: 300, Index: 6}}, delaysOf(sm))
	require.Equal(t, uint64(5), sm.LastToken())
	require.Equal(t, uint64(11), sm.AppliedIndex())
	require.Equal(t, 0, sm.SessionLen(), "the sessions of the replaced state are gone")
	require.Equal(t, data, snapshotBytes(t, sm))

	require.Equal(t, []core.Result{
		{Outcome: core.OutcomeSessionCreated, Session: 12, LeaseMS: 1000},
		{Outcome: core.OutcomeLimitMismatch, Token: 5, Holders: 1},
		{Outcome: core.OutcomeGranted, Token: 6, LeaseMS: 1000, Created: true, Mode: core.ModeShared, Holders: 1, Session: 12},
	}, applyAll(t, sm,
		core.CreateSession(1000),
		core.Grant("a", 1000, "o9").WithLimit(2),
		core.Grant("b", 1000, "o9").WithMode(core.ModeShared).WithSession(12),
	))
	require.Equal(t, core.SnapshotVersion, snapshotBytes(t, sm)[0])
}

// TestSnapshotFormatVersion3 pins the version 3 layout: one record per
// holder in key and token order, then members, delays and sessions.
func TestSnapshotFormatVersion3(t *testing.T) {
	t.Parallel()
	want := buildSnapshot(core.SnapshotVersion,
		rawRecord(t, &corepb.SnapshotHeader{AppliedIndex: 7, LastToken: 4, LockCount: 4, SessionCount: 2}),
		rawRecord(t, &corepb.LockRecord{Key: "e", Token: 4, LeaseMs: 1000, Owner: "o4", ModIndex: 6}),
		rawRecord(t, &corepb.LockRecord{Key: "r", Token: 1, LeaseMs: 1000, Owner: "o1", ModIndex: 3, Mode: 1}),
		rawRecord(t, &corepb.LockRecord{Key: "r", Token: 2, LeaseMs: 4000, Owner: "o2", ModIndex: 4, Mode: 1, Session: 1}),
		rawRecord(t, &corepb.LockRecord{Key: "s", Token: 3, LeaseMs: 1000, Owner: "o3", ModIndex: 5, LockDelayMs: 50, Limit: 3}),
		rawRecord(t, &corepb.SessionRecord{Id: 1, TtlMs: 4000, ModIndex: 7}),
		rawRecord(t, &corepb.SessionRecord{Id: 2, TtlMs: 2000, ModIndex: 2, Principal: "svc"}),
	)
	sm := sessionState(t)
	require.Equal(t, want, snapshotBytes(t, sm))

	again := core.NewStateMachine()
	require.NoError(t, again.Restore(bytes.NewReader(want)))
	require.Equal(t, want, snapshotBytes(t, again))
	require.Equal(t, locksOf(sm), locksOf(again))
	require.Equal(t, sm.SessionLocks(1), again.SessionLocks(1), "the session index is rebuilt")
	require.Equal(t, 3, again.Len())
	require.Equal(t, 4, again.HolderLen())
}

// TestRestoreRejectsVersion3 covers the checks Restore makes of holders and
// sessions; each snapshot is otherwise well formed.
func TestRestoreRejectsVersion3(t *testing.T) {
	t.Parallel()
	hdr := func(locks, sessions uint64) []byte {
		return rawRecord(t, &corepb.SnapshotHeader{AppliedIndex: 10, LastToken: 5, LockCount: locks, SessionCount: sessions})
	}
	holder := func(key string, token uint64, mode, limit uint32, session uint64) []byte {
		return rawRecord(t, &corepb.LockRecord{Key: key, Token: token, LeaseMs: 1000, Owner: "o", Mode: mode, Limit: limit, Session: session})
	}
	holderOf := func(key string, token, session uint64, principal string) []byte {
		return rawRecord(t, &corepb.LockRecord{Key: key, Token: token, LeaseMs: 1000, Owner: "o", Session: session, Principal: principal})
	}
	session := func(id, modIndex uint64, principal string) []byte {
		return rawRecord(t, &corepb.SessionRecord{Id: id, TtlMs: 1000, ModIndex: modIndex, Principal: principal})
	}
	v2, v3 := core.SnapshotVersion2, core.SnapshotVersion
	tests := []struct {
		name string
		data []byte
	}{
		{"v3_of_a_plain_state", buildSnapshot(v3, hdr(1, 0), holder("a", 1, 0, 0, 0))},
		{"v2_with_mode", buildSnapshot(v2, hdr(1, 0), holder("a", 1, 1, 0, 0))},
		{"v2_with_limit", buildSnapshot(v2, hdr(1, 0), holder("a", 1, 0, 2, 0))},
		{"v2_with_session_count", buildSnapshot(v2, hdr(0, 1), session(1, 1, ""))},
		{"two_exclusive_holders", buildSnapshot(v3, hdr(2, 1), holder("a", 1, 0, 0, 1), holder("a", 2, 0, 0, 0), session(1, 1, ""))},
		{"over_the_limit", buildSnapshot(v3, hdr(3, 0), holder("a", 1, 0, 2, 0), holder("a", 2, 0, 2, 0), holder("a", 3, 0, 2, 0))},
		{"holders_disagree_on_mode", buildSnapshot(v3, hdr(2, 0), holder("a", 1, 1, 0, 0), holder("a", 2, 0, 0, 0))},
		{"holders_disagree_on_limit", buildSnapshot(v3, hdr(2, 0), holder("a", 1, 0, 2, 0), holder("a", 2, 0, 3, 0))},
		{"holder_tokens_out_of_order", buildSnapshot(v3, hdr(2, 0), holder("a", 2, 1, 0, 0), holder("a", 1, 1, 0, 0))},
		{"duplicate_holder", buildSnapshot(v3, hdr(2, 0), holder("a", 1, 1, 0, 0), holder("a", 1, 1, 0, 0))},
		{"unknown_mode", buildSnapshot(v3, hdr(1, 0), holder("a", 1, 2, 0, 0))},
		{"shared_with_limit", buildSnapshot(v3, hdr(1, 0), holder("a", 1, 1, 2, 0))},
		{"holder_under_unknown_session", buildSnapshot(v3, hdr(1, 1), holder("a", 1, 0, 0, 2), session(1, 1, ""))},
		{"holder_of_another_principal", buildSnapshot(v3, hdr(1, 1), holder("a", 1, 0, 0, 1), session(1, 1, "svc"))},
		{"holders_of_one_session_of_two_principals", buildSnapshot(v3, hdr(2, 1),
			holderOf("a", 1, 1, ""), holderOf("b", 2, 1, "svc"), session(1, 1, "svc"))},
		{"holders_of_one_session_of_two_principals_first_wrong", buildSnapshot(v3, hdr(2, 1),
			holderOf("a", 1, 1, "svc"), holderOf("b", 2, 1, ""), session(1, 1, "svc"))},
		{"sessions_out_of_order", buildSnapshot(v3, hdr(0, 2), session(2, 2, ""), session(1, 1, ""))},
		{"duplicate_session", buildSnapshot(v3, hdr(0, 2), session(1, 1, ""), session(1, 1, ""))},
		{"session_zero", buildSnapshot(v3, hdr(0, 1), session(0, 1, ""))},
		{"session_above_applied", buildSnapshot(v3, hdr(0, 1), session(11, 11, ""))},
		{"session_kept_alive_before_it_opened", buildSnapshot(v3, hdr(0, 1), session(5, 4, ""))},
		{"fewer_sessions_than_header_says", buildSnapshot(v3, hdr(0, 2), session(1, 1, ""))},
		{"huge_session_count", buildSnapshot(v3, hdr(0, 1<<62), session(1, 1, ""))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sm := sessionState(t)
			before := snapshotBytes(t, sm)
			err := sm.Restore(bytes.NewReader(tt.data))
			assert.ErrorIs(t, err, core.ErrDecode)
			assert.Equal(t, before, snapshotBytes(t, sm), "state changed by a failed Restore")
			_, err = core.CheckSnapshot(tt.data)
			assert.ErrorIs(t, err, core.ErrDecode, "CheckSnapshot accepts what Restore refuses")
		})
	}
	// The well-formed neighbours of the cases above restore, so each case
	// fails for its own fault.
	for _, ok := range [][]byte{
		buildSnapshot(v2, hdr(1, 0), holder("a", 1, 0, 0, 0)),
		buildSnapshot(v3, hdr(2, 0), holder("a", 1, 0, 2, 0), holder("a", 2, 0, 2, 0)),
		buildSnapshot(v3, hdr(2, 0), holder("a", 1, 1, 0, 0), holder("a", 2, 1, 0, 0)),
		buildSnapshot(v3, hdr(1, 1), holder("a", 1, 0, 0, 1), session(1, 1, "")),
		buildSnapshot(v3, hdr(2, 1), holderOf("a", 1, 1, "svc"), holderOf("b", 2, 1, "svc"), session(1, 1, "svc")),
		buildSnapshot(v3, hdr(0, 2), session(1, 1, ""), session(2, 10, "")),
	} {
		require.NoError(t, core.NewStateMachine().Restore(bytes.NewReader(ok)))
		_, err := core.CheckSnapshot(ok)
		require.NoError(t, err)
	}
}
