package core_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
)

// applyAll applies cmds at indexes AppliedIndex()+1, +2, ... and returns their results.
func applyAll(t testing.TB, sm *core.StateMachine, cmds ...core.Command) []core.Result {
	t.Helper()
	out := make([]core.Result, 0, len(cmds))
	for _, c := range cmds {
		res, err := sm.Apply(sm.AppliedIndex()+1, c)
		if err != nil {
			t.Fatalf("apply %v: %v", c.Op, err)
		}
		out = append(out, res)
	}
	return out
}

// locksOf returns every held lock in key order.
func locksOf(sm *core.StateMachine) []core.Lock {
	var out []core.Lock
	sm.Ascend(func(l core.Lock) bool {
		out = append(out, l)
		return true
	})
	return out
}

// delaysOf returns every lock-delay record in key order.
func delaysOf(sm *core.StateMachine) []core.LockDelay {
	var out []core.LockDelay
	sm.AscendLockDelays(func(d core.LockDelay) bool {
		out = append(out, d)
		return true
	})
	return out
}

// snapshotBytes returns the serialized snapshot of sm.
func snapshotBytes(t testing.TB, sm *core.StateMachine) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := sm.WriteSnapshot(&buf); err != nil {
		t.Fatalf("write snapshot: %v", err)
	}
	return buf.Bytes()
}

// granted is the Result of a Grant that created its lock.
func granted(token uint64, leaseMS int64) core.Result {
	return core.Result{Outcome: core.OutcomeGranted, Token: token, LeaseMS: leaseMS, Created: true}
}

// regranted is the Result of an idempotent retry: the owner's existing lock.
func regranted(token uint64, leaseMS int64) core.Result {
	return core.Result{Outcome: core.OutcomeGranted, Token: token, LeaseMS: leaseMS}
}

// lock is a held lock without lock-delay or principal, last changed at modIndex.
func lock(key string, token uint64, leaseMS int64, owner string, modIndex uint64) core.Lock {
	return core.Lock{Key: key, Token: token, LeaseMS: leaseMS, Owner: owner, ModIndex: modIndex}
}

// TestApplyCommandTable covers every row of the command table of docs/design.md#replicated-commands: each
// case applies setup, then cmd, and checks cmd's Result and the state after.
func TestApplyCommandTable(t *testing.T) {
	t.Parallel()
	var (
		noop     = core.Result{Outcome: core.OutcomeNoop}
		released = core.Result{Outcome: core.OutcomeReleased}
		notFound = core.Result{Outcome: core.OutcomeNotFound}
		expired  = core.Result{Outcome: core.OutcomeExpired, Existed: true}
		stale    = core.Result{Outcome: core.OutcomeExpired, Existed: false}
		renewed  = func(leaseMS int64) core.Result { return core.Result{Outcome: core.OutcomeRenewed, LeaseMS: leaseMS} }
		delayed  = core.Grant("a", 1000, "o1").WithLockDelay(5000)
		withP    = func(l core.Lock, p string) core.Lock { l.Principal = p; return l }
		withD    = func(l core.Lock, ms int64) core.Lock { l.LockDelayMS = ms; return l }
	)
	tests := []struct {
		name          string
		setup         []core.Command
		cmd           core.Command
		want          core.Result
		wantLocks     []core.Lock
		wantLastToken uint64
		wantMembers   map[string]string
		wantDelays    []core.LockDelay
	}{
		{
			name:          "grant_free_key",
			cmd:           core.Grant("a", 1000, "o1"),
			want:          granted(1, 1000),
			wantLocks:     []core.Lock{lock("a", 1, 1000, "o1", 1)},
			wantLastToken: 1,
		},
		{
			name:          "grant_free_key_takes_next_token",
			setup:         []core.Command{core.Grant("b", 500, "o2")},
			cmd:           core.Grant("a", 1000, "o1"),
			want:          granted(2, 1000),
			wantLocks:     []core.Lock{lock("a", 2, 1000, "o1", 2), lock("b", 1, 500, "o2", 1)},
			wantLastToken: 2,
		},
		{
			name:          "grant_held_by_same_owner_is_idempotent",
			setup:         []core.Command{core.Grant("a", 1000, "o1")},
			cmd:           core.Grant("a", 5000, "o1"),
			want:          regranted(1, 1000), // the same lock and lease; the lease restarts at index 2
			wantLocks:     []core.Lock{lock("a", 1, 1000, "o1", 2)},
			wantLastToken: 1,
		},
		{
			name:          "grant_held_by_other_owner_is_rejected",
			setup:         []core.Command{core.Grant("a", 1000, "o1")},
			cmd:           core.Grant("a", 1000, "o2"),
			want:          core.Result{Outcome: core.OutcomeGrantRejected, Token: 1},
			wantLocks:     []core.Lock{lock("a", 1, 1000, "o1", 1)},
			wantLastToken: 1,
		},
		{
			name:          "grant_after_release_gets_a_new_token",
			setup:         []core.Command{core.Grant("a", 1000, "o1"), core.Release("a", 1)},
			cmd:           core.Grant("a", 1000, "o1"),
			want:          granted(2, 1000),
			wantLocks:     []core.Lock{lock("a", 2, 1000, "o1", 3)},
			wantLastToken: 2,
		},
		{
			name:          "release_with_right_token",
			setup:         []core.Command{core.Grant("a", 1000, "o1"), core.Grant("b", 1000, "o1")},
			cmd:           core.Release("a", 1),
			want:          released,
			wantLocks:     []core.Lock{lock("b", 2, 1000, "o1", 2)},
			wantLastToken: 2,
		},
		{
			name:          "release_with_wrong_token",
			setup:         []core.Command{core.Grant("a", 1000, "o1")},
			cmd:           core.Release("a", 7),
			want:          notFound,
			wantLocks:     []core.Lock{lock("a", 1, 1000, "o1", 1)},
			wantLastToken: 1,
		},
		{
			name: "release_with_stale_token",
			setup: []core.Command{
				core.Grant("a", 1000, "o1"), core.Release("a", 1), core.Grant("a", 2000, "o2"),
			},
			cmd:           core.Release("a", 1),
			want:          notFound,
			wantLocks:     []core.Lock{lock("a", 2, 2000, "o2", 3)},
			wantLastToken: 2,
		},
		{
			name:          "release_free_key",
			cmd:           core.Release("a", 1),
			want:          notFound,
			wantLastToken: 0,
		},
		{
			name:          "release_twice",
			setup:         []core.Command{core.Grant("a", 1000, "o1"), core.Release("a", 1)},
			cmd:           core.Release("a", 1),
			want:          notFound,
			wantLastToken: 1,
		},
		{
			name:          "expire_with_right_token",
			setup:         []core.Command{core.Grant("a", 1000, "o1")},
			cmd:           core.Expire("a", 1),
			want:          expired,
			wantLastToken: 1,
		},
		{
			name:          "expire_with_stale_token",
			setup:         []core.Command{core.Grant("a", 1000, "o1"), core.Expire("a", 1)},
			cmd:           core.Expire("a", 1), // a duplicate expiry
			want:          stale,
			wantLastToken: 1,
		},
		{
			name:          "expire_with_wrong_token",
			setup:         []core.Command{core.Grant("a", 1000, "o1")},
			cmd:           core.Expire("a", 2),
			want:          stale,
			wantLocks:     []core.Lock{lock("a", 1, 1000, "o1", 1)},
			wantLastToken: 1,
		},
		{
			name: "expire_after_regrant_keeps_the_new_lock",
			setup: []core.Command{
				core.Grant("a", 1000, "o1"), core.Release("a", 1), core.Grant("a", 3000, "o2"),
			},
			cmd:           core.Expire("a", 1),
			want:          stale,
			wantLocks:     []core.Lock{lock("a", 2, 3000, "o2", 3)},
			wantLastToken: 2,
		},
		{
			name:          "renew_with_right_token_moves_mod_index",
			setup:         []core.Command{core.Grant("a", 1000, "o1"), core.Grant("b", 2000, "o2")},
			cmd:           core.Renew("a", 1),
			want:          renewed(1000),
			wantLocks:     []core.Lock{lock("a", 1, 1000, "o1", 3), lock("b", 2, 2000, "o2", 2)},
			wantLastToken: 2,
		},
		{
			name:          "renew_with_wrong_token",
			setup:         []core.Command{core.Grant("a", 1000, "o1")},
			cmd:           core.Renew("a", 2),
			want:          notFound,
			wantLocks:     []core.Lock{lock("a", 1, 1000, "o1", 1)},
			wantLastToken: 1,
		},
		{
			name:          "renew_free_key",
			setup:         []core.Command{core.Grant("a", 1000, "o1"), core.Release("a", 1)},
			cmd:           core.Renew("a", 1),
			want:          notFound,
			wantLastToken: 1,
		},
		{
			name:          "expire_seen_at_mod_index",
			setup:         []core.Command{core.Grant("a", 1000, "o1"), core.Renew("a", 1)},
			cmd:           core.ExpireSeen("a", 1, 2),
			want:          expired,
			wantLastToken: 1,
		},
		{
			name:          "expire_seen_before_renew_keeps_the_lock",
			setup:         []core.Command{core.Grant("a", 1000, "o1"), core.Renew("a", 1)},
			cmd:           core.ExpireSeen("a", 1, 1),
			want:          stale,
			wantLocks:     []core.Lock{lock("a", 1, 1000, "o1", 2)},
			wantLastToken: 1,
		},
		{
			name:          "expire_seen_before_retry_grant_keeps_the_lock",
			setup:         []core.Command{core.Grant("a", 1000, "o1"), core.Grant("a", 1000, "o1")},
			cmd:           core.ExpireSeen("a", 1, 1),
			want:          stale,
			wantLocks:     []core.Lock{lock("a", 1, 1000, "o1", 2)},
			wantLastToken: 1,
		},
		{
			name:          "expire_seen_zero_is_unconditional",
			setup:         []core.Command{core.Grant("a", 1000, "o1"), core.Renew("a", 1)},
			cmd:           core.ExpireSeen("a", 1, 0),
			want:          expired,
			wantLastToken: 1,
		},
		{
			name:          "grant_keeps_lock_delay_and_principal",
			cmd:           delayed.WithPrincipal("svc"),
			want:          granted(1, 1000),
			wantLocks:     []core.Lock{withP(withD(lock("a", 1, 1000, "o1", 1), 5000), "svc")},
			wantLastToken: 1,
		},
		{
			name:          "expire_of_delayed_lock_records_the_delay",
			setup:         []core.Command{delayed},
			cmd:           core.Expire("a", 1),
			want:          core.Result{Outcome: core.OutcomeExpired, Existed: true, LockDelayMS: 5000},
			wantLastToken: 1,
			wantDelays:    []core.LockDelay{{Key: "a", LockDelayMS: 5000, Index: 2}},
		},
		{
			name:          "release_of_delayed_lock_records_nothing",
			setup:         []core.Command{delayed},
			cmd:           core.Release("a", 1),
			want:          released,
			wantLastToken: 1,
		},
		{
			name:          "stale_expire_of_delayed_lock_records_nothing",
			setup:         []core.Command{delayed, core.Renew("a", 1)},
			cmd:           core.ExpireSeen("a", 1, 1),
			want:          stale,
			wantLocks:     []core.Lock{withD(lock("a", 1, 1000, "o1", 2), 5000)},
			wantLastToken: 1,
		},
		{
			name:          "grant_clears_the_delay",
			setup:         []core.Command{delayed, core.Expire("a", 1), delayed.WithLockDelay(0).WithPrincipal("p")},
			cmd:           core.Noop(),
			want:          noop,
			wantLocks:     []core.Lock{withP(lock("a", 2, 1000, "o1", 3), "p")},
			wantLastToken: 2,
		},
		{
			name:          "rejected_grant_keeps_other_delays",
			setup:         []core.Command{delayed, core.Expire("a", 1), core.Grant("b", 1000, "o2")},
			cmd:           core.Grant("b", 1000, "o3"),
			want:          core.Result{Outcome: core.OutcomeGrantRejected, Token: 2},
			wantLocks:     []core.Lock{lock("b", 2, 1000, "o2", 3)},
			wantLastToken: 2,
			wantDelays:    []core.LockDelay{{Key: "a", LockDelayMS: 5000, Index: 2}},
		},
		{
			name:          "same_owner_other_principal_is_rejected",
			setup:         []core.Command{core.Grant("a", 1000, "o1").WithPrincipal("alice")},
			cmd:           core.Grant("a", 1000, "o1").WithPrincipal("mallory"),
			want:          core.Result{Outcome: core.OutcomeGrantRejected, Token: 1},
			wantLocks:     []core.Lock{withP(lock("a", 1, 1000, "o1", 1), "alice")},
			wantLastToken: 1,
		},
		{
			name:          "same_owner_same_principal_is_a_retry",
			setup:         []core.Command{core.Grant("a", 1000, "o1").WithPrincipal("alice")},
			cmd:           core.Grant("a", 1000, "o1").WithPrincipal("alice"),
			want:          regranted(1, 1000),
			wantLocks:     []core.Lock{withP(lock("a", 1, 1000, "o1", 2), "alice")},
			wantLastToken: 1,
		},
		{
			name:          "noop_changes_nothing",
			setup:         []core.Command{core.Grant("a", 1000, "o1")},
			cmd:           core.Noop(),
			want:          noop,
			wantLocks:     []core.Lock{lock("a", 1, 1000, "o1", 1)},
			wantLastToken: 1,
		},
		{
			name:          "set_member_records_the_address",
			setup:         []core.Command{core.Grant("a", 1000, "o1"), core.SetMember("n2", "127.0.0.1:7002")},
			cmd:           core.SetMember("n1", "127.0.0.1:7001"),
			want:          noop,
			wantLocks:     []core.Lock{lock("a", 1, 1000, "o1", 1)},
			wantLastToken: 1,
			wantMembers:   map[string]string{"n1": "127.0.0.1:7001", "n2": "127.0.0.1:7002"},
		},
		{
			name:          "set_member_replaces_the_address",
			setup:         []core.Command{core.SetMember("n1", "127.0.0.1:7001")},
			cmd:           core.SetMember("n1", "127.0.0.1:8001"),
			want:          noop,
			wantMembers:   map[string]string{"n1": "127.0.0.1:8001"},
			wantLastToken: 0,
		},
		{
			name:          "set_member_with_empty_address_removes_it",
			setup:         []core.Command{core.SetMember("n1", "127.0.0.1:7001"), core.SetMember("n2", "127.0.0.1:7002")},
			cmd:           core.SetMember("n1", ""),
			want:          noop,
			wantMembers:   map[string]string{"n2": "127.0.0.1:7002"},
			wantLastToken: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sm := core.NewStateMachine()
			applyAll(t, sm, tt.setup...)
			index := sm.AppliedIndex() + 1
			got, err := sm.Apply(index, tt.cmd)
			if !assert.NoError(t, err) {
				return
			}
			assert.Equal(t, tt.want, got, "result")
			assert.Equal(t, tt.wantLocks, locksOf(sm), "locks")
			assert.Equal(t, len(tt.wantLocks), sm.Len(), "Len")
			assert.Equal(t, tt.wantLastToken, sm.LastToken(), "LastToken")
			assert.Equal(t, index, sm.AppliedIndex(), "AppliedIndex")
			if tt.wantMembers == nil {
				tt.wantMembers = map[string]string{}
			}
			assert.Equal(t, tt.wantMembers, sm.Members(), "Members")
			assert.Equal(t, tt.wantDelays, delaysOf(sm), "lock delays")
			for _, d := range tt.wantDelays {
				got, ok := sm.LockDelay(d.Key)
				assert.True(t, ok, "LockDelay(%q)", d.Key)
				assert.Equal(t, d, got, "LockDelay(%q)", d.Key)
			}
			for _, l := range tt.wantLocks {
				_, ok := sm.LockDelay(l.Key)
				assert.False(t, ok, "held key %q is also delayed", l.Key)
			}
			for id, addr := range tt.wantMembers {
				got, ok := sm.MemberAPIAddr(id)
				assert.True(t, ok, "MemberAPIAddr(%q)", id)
				assert.Equal(t, addr, got, "MemberAPIAddr(%q)", id)
			}
		})
	}
}

// TestApplyReplayIsNoop checks that an index at or below AppliedIndex is never
// applied again, whatever the command (docs/design.md#replicated-commands).
func TestApplyReplayIsNoop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		index uint64
		cmd   core.Command
	}{
		{"index_zero_grant", 0, core.Grant("b", 1000, "o1")},
		{"same_index_grant", 3, core.Grant("b", 1000, "o1")},
		{"older_index_release", 1, core.Release("a", 1)},
		{"same_index_expire", 3, core.Expire("a", 1)},
		{"same_index_renew", 3, core.Renew("a", 1)},
		{"older_index_set_member", 2, core.SetMember("n1", "127.0.0.1:7001")},
		{"older_index_unknown_op", 2, core.Command{Op: core.Op(200)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sm := core.NewStateMachine()
			applyAll(t, sm, core.Grant("a", 1000, "o1"), core.Noop(), core.Noop())
			before := snapshotBytes(t, sm)
			got, err := sm.Apply(tt.index, tt.cmd)
			assert.NoError(t, err)
			assert.Equal(t, core.Result{Outcome: core.OutcomeNoop}, got)
			assert.Equal(t, uint64(3), sm.AppliedIndex())
			assert.Equal(t, before, snapshotBytes(t, sm), "snapshot bytes changed")
		})
	}
}

// TestApplyIndexGaps checks that indexes need not be contiguous: entries that
// carry no command (configuration changes) leave gaps.
func TestApplyIndexGaps(t *testing.T) {
	t.Parallel()
	sm := core.NewStateMachine()
	res, err := sm.Apply(5, core.Grant("a", 1000, "o1"))
	require.NoError(t, err)
	require.Equal(t, granted(1, 1000), res)
	res, err = sm.Apply(9, core.Release("a", 1))
	require.NoError(t, err)
	require.Equal(t, core.OutcomeReleased, res.Outcome)
	require.Equal(t, uint64(9), sm.AppliedIndex())
}

func TestApplyUnknownOpIsFatal(t *testing.T) {
	t.Parallel()
	sm := core.NewStateMachine()
	applyAll(t, sm, core.Grant("a", 1000, "o1"))
	before := snapshotBytes(t, sm)
	_, err := sm.Apply(2, core.Command{Op: core.Op(200), Key: "a", Token: 1})
	require.ErrorIs(t, err, core.ErrDecode)
	require.Equal(t, uint64(1), sm.AppliedIndex(), "a failed entry must not count as applied")
	require.Equal(t, before, snapshotBytes(t, sm))
}

func TestApplyEntry(t *testing.T) {
	t.Parallel()
	sm := core.NewStateMachine()
	data, err := core.Encode(core.Grant("a", 1000, "o1"))
	require.NoError(t, err)
	cmd, res, err := sm.ApplyEntry(1, data)
	require.NoError(t, err)
	require.Equal(t, core.Grant("a", 1000, "o1"), cmd)
	require.Equal(t, granted(1, 1000), res)

	before := snapshotBytes(t, sm)
	for _, bad := range [][]byte{nil, {}, {core.CommandVersion2 + 1}, {core.CommandVersion, 0xff, 0xff}} {
		_, _, err := sm.ApplyEntry(2, bad)
		require.ErrorIs(t, err, core.ErrDecode, "entry %x", bad)
	}
	require.Equal(t, uint64(1), sm.AppliedIndex(), "an undecodable entry must not count as applied")
	require.Equal(t, before, snapshotBytes(t, sm))
}

func TestSkip(t *testing.T) {
	t.Parallel()
	sm := core.NewStateMachine()
	applyAll(t, sm, core.Grant("a", 1000, "o1"))
	sm.Skip(4)
	require.Equal(t, uint64(4), sm.AppliedIndex())
	sm.Skip(2) // at or below: ignored
	require.Equal(t, uint64(4), sm.AppliedIndex())
	res, err := sm.Apply(3, core.Release("a", 1))
	require.NoError(t, err)
	require.Equal(t, core.OutcomeNoop, res.Outcome, "index 3 was skipped, so it is a replay")
	require.Equal(t, []core.Lock{lock("a", 1, 1000, "o1", 1)}, locksOf(sm))
}

func TestGet(t *testing.T) {
	t.Parallel()
	sm := core.NewStateMachine()
	applyAll(t, sm, core.Grant("a", 1000, "o1"), core.Grant("b", 2000, "o2"))
	got, ok := sm.Get("b")
	require.True(t, ok)
	require.Equal(t, lock("b", 2, 2000, "o2", 2), got)
	_, ok = sm.Get("c")
	require.False(t, ok)
}

func TestRange(t *testing.T) {
	t.Parallel()
	sm := core.NewStateMachine()
	for _, k := range []string{"a", "b/1", "b/2", "b/3", "b0", "c"} {
		applyAll(t, sm, core.Grant(k, 1000, "o"))
	}
	keys := func(ls []core.Lock) []string {
		out := []string{}
		for _, l := range ls {
			out = append(out, l.Key)
		}
		return out
	}
	tests := []struct {
		name          string
		prefix, after string
		limit         int
		want          []string
	}{
		{"all", "", "", 0, []string{"a", "b/1", "b/2", "b/3", "b0", "c"}},
		{"prefix", "b/", "", 0, []string{"b/1", "b/2", "b/3"}},
		{"prefix_with_limit", "b/", "", 2, []string{"b/1", "b/2"}},
		{"prefix_after", "b/", "b/1", 2, []string{"b/2", "b/3"}},
		{"after_last", "b/", "b/3", 0, []string{}},
		{"after_before_prefix", "b/", "a", 0, []string{"b/1", "b/2", "b/3"}},
		{"after_past_prefix", "b/", "c", 0, []string{}},
		{"no_prefix_after", "", "b0", 0, []string{"c"}},
		{"no_match", "x", "", 0, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, keys(sm.Range(tt.prefix, tt.after, tt.limit)))
		})
	}
}

// TestSnapshotIsPointInTime checks that a Snapshot taken before more Applies
// still writes the state of its own moment.
func TestSnapshotIsPointInTime(t *testing.T) {
	t.Parallel()
	sm := core.NewStateMachine()
	applyAll(t, sm, core.Grant("a", 1000, "o1"), core.SetMember("n1", "127.0.0.1:7001"))
	want := snapshotBytes(t, sm)
	sn := sm.Snapshot()
	applyAll(t, sm, core.Release("a", 1), core.Grant("b", 1000, "o2"), core.SetMember("n1", ""))
	var buf bytes.Buffer
	n, err := sn.WriteTo(&buf)
	require.NoError(t, err)
	require.Equal(t, int64(buf.Len()), n)
	require.Equal(t, want, buf.Bytes())
	require.Equal(t, uint64(2), sn.AppliedIndex())
	require.NotEqual(t, want, snapshotBytes(t, sm))
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	t.Parallel()
	sm := core.NewStateMachine()
	applyAll(t, sm,
		core.Grant("b", 1000, "o1"), core.Grant("a", 2000, "o2"), core.Grant("c", 3000, "o3"),
		core.Release("b", 1), core.SetMember("n2", "127.0.0.1:7002"), core.SetMember("n1", "127.0.0.1:7001"),
		core.Grant("d", 1000, "o4").WithLockDelay(700).WithPrincipal("svc"), core.Renew("a", 2),
		core.Grant("e", 1000, "o5").WithLockDelay(900), core.Expire("e", 5),
	)
	data := snapshotBytes(t, sm)
	restored := core.NewStateMachine()
	applyAll(t, restored, core.Grant("zzz", 1, "x")) // state to be replaced
	require.NoError(t, restored.Restore(bytes.NewReader(data)))
	require.Equal(t, data, snapshotBytes(t, restored))
	require.Equal(t, locksOf(sm), locksOf(restored))
	require.Equal(t, sm.LastToken(), restored.LastToken())
	require.Equal(t, sm.AppliedIndex(), restored.AppliedIndex())
	require.Equal(t, sm.Members(), restored.Members())
	require.Equal(t, delaysOf(sm), delaysOf(restored))
	require.Len(t, delaysOf(restored), 1)
	// Restored state continues exactly as the original.
	for _, c := range []core.Command{core.Grant("b", 1000, "o4"), core.Release("a", 2)} {
		want := applyAll(t, sm, c)
		require.Equal(t, want, applyAll(t, restored, c))
	}
	require.Equal(t, snapshotBytes(t, sm), snapshotBytes(t, restored))
}

// errWriter fails every write.
type errWriter struct{}

var errSink = errors.New("sink failed")

func (errWriter) Write([]byte) (int, error) { return 0, errSink }

func TestSnapshotWriteError(t *testing.T) {
	t.Parallel()
	sm := core.NewStateMachine()
	for i := range 5000 { // more than the write buffer
		applyAll(t, sm, core.Grant(string(rune('a'+i%26))+string(rune(0x100+i)), 1000, "owner"))
	}
	require.ErrorIs(t, sm.WriteSnapshot(errWriter{}), errSink)
}
