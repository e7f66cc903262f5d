package check_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/faults/check"
	"github.com/ticketd/ticketd/faults/history"
)

func properties(r check.Report) map[check.Property]bool {
	out := map[check.Property]bool{}
	for _, v := range r.Violations {
		out[v.Property] = true
	}
	return out
}

// TestCheckerFlagsBugs: histories that a buggy lock service could produce are
// flagged, each by the properties it breaks.
func TestCheckerFlagsBugs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		build func(h *hist)
		final uint64
		want  []check.Property
	}{
		{
			// B is granted the key while A's lease still runs.
			name: "double_grant_within_lease",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 1000, 0, 10, 1)
				h.acquire(1, "k", "b", 1000, 100, 110, 2)
			},
			want: []check.Property{check.PropLinearizable, check.PropLease},
		},
		{
			// The same token handed to two owners (on two keys).
			name: "token_granted_twice",
			build: func(h *hist) {
				h.acquire(0, "k1", "a", 1000, 0, 10, 1)
				h.acquire(1, "k2", "b", 1000, 100, 110, 1)
			},
			want: []check.Property{check.PropFencing},
		},
		{
			// Token 3 granted on another key after token 5 was acknowledged.
			name: "non_increasing_token_across_keys",
			build: func(h *hist) {
				h.acquire(0, "k1", "a", 1000, 0, 10, 5)
				h.acquire(1, "k2", "b", 1000, 100, 110, 3)
			},
			want: []check.Property{check.PropFencing},
		},
		{
			// On one key, after a release, a smaller token.
			name: "non_increasing_token_same_key",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 1000, 0, 10, 5)
				h.release(0, "k", 5, history.OK, 20, 30)
				h.acquire(1, "k", "b", 1000, 100, 110, 4)
			},
			want: []check.Property{check.PropLinearizable, check.PropFencing},
		},
		{
			// An acknowledged grant is gone after a restart, before its lease ended.
			name: "lost_acknowledged_grant",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 10000, 0, 10, 1)
				h.getFree(1, "k", 2000, 2010).Tag = check.TagFinal
			},
			final: 1,
			want:  []check.Property{check.PropLinearizable, check.PropDurability},
		},
		{
			// After a restart the lost grant's token is handed out again.
			name: "lost_grant_token_reused",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 10000, 0, 10, 1)
				h.acquire(1, "k", "b", 10000, 2000, 2010, 1)
			},
			want: []check.Property{check.PropLinearizable, check.PropFencing},
		},
		{
			name: "lost_acknowledged_release",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 10000, 0, 10, 1)
				h.release(0, "k", 1, history.OK, 20, 30)
				h.getHeld(1, "k", 1, "a", 2000, 2010).Tag = check.TagFinal
			},
			want: []check.Property{check.PropLinearizable, check.PropDurability},
		},
		{
			name: "token_counter_regressed",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 1000, 0, 10, 7)
			},
			final: 3,
			want:  []check.Property{check.PropDurability},
		},
		{
			// The lock vanished (expired early) before its lease could end.
			name: "early_expiry_seen_by_get",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 1000, 0, 10, 1)
				h.getFree(1, "k", 500, 510)
			},
			want: []check.Property{check.PropLinearizable},
		},
		{
			// An acknowledged renewal protects the lock for another lease from its call.
			name: "grant_before_renewed_lease_ends",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 1000, 0, 10, 1)
				h.renew(0, "k", 1, 1000, history.OK, 800, 810)
				h.acquire(1, "k", "b", 1000, 1500, 1510, 2)
			},
			want: []check.Property{check.PropLinearizable, check.PropLease},
		},
		{
			// A retried Acquire's acknowledgement counts from the retry's call.
			name: "grant_before_retried_acquire_lease_ends",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 1000, 0, 10, 1)
				h.acquire(0, "k", "a", 1000, 900, 910, 1)
				h.acquire(1, "k", "b", 1000, 1500, 1510, 2)
			},
			want: []check.Property{check.PropLinearizable, check.PropLease},
		},
		{
			name: "renew_of_released_lock",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 1000, 0, 10, 1)
				h.release(0, "k", 1, history.OK, 20, 30)
				h.renew(0, "k", 1, 1000, history.OK, 40, 50)
			},
			want: []check.Property{check.PropLinearizable},
		},
		{
			name: "check_token_valid_for_old_holder",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 1000, 0, 10, 1)
				h.release(0, "k", 1, history.OK, 20, 30)
				h.acquire(1, "k", "b", 1000, 40, 50, 2)
				h.checkToken(2, "k", 1, true, 1, 60, 70)
			},
			want: []check.Property{check.PropLinearizable},
		},
		{
			name: "check_token_invalid_within_lease",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 1000, 0, 10, 1)
				h.checkToken(1, "k", 1, false, 1, 500, 510)
			},
			want: []check.Property{check.PropLinearizable},
		},
		{
			// A renewal refused while the lock is within its lease, though a
			// waiting Acquire that returns late could linearise after an expiry.
			name: "renew_refused_within_lease",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 1000, 0, 10, 1)
				h.acquireWait(1, "k", "b", 1000, 100, 1500, 2)
				h.renew(0, "k", 1, 1000, history.Fail, 200, 300)
			},
			want: []check.Property{check.PropLinearizable},
		},
		{
			name: "already_exists_on_free_key",
			build: func(h *hist) {
				h.acquireHeld(0, "k", "a", 0, 10)
			},
			want: []check.Property{check.PropLinearizable},
		},
		{
			// A stale read: a Get that started after the release still sees the lock.
			name: "stale_read_after_release",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 10000, 0, 10, 1)
				h.release(0, "k", 1, history.OK, 20, 30)
				h.getHeld(1, "k", 1, "a", 40, 50)
			},
			want: []check.Property{check.PropLinearizable},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var h hist
			tc.build(&h)
			r := check.Run(check.Input{Ops: h.ops, FinalLastToken: tc.final, Timeout: time.Minute})
			got := properties(r)
			for _, v := range r.Violations {
				if v.Property == check.PropLinearizable && v.Key == "" {
					t.Errorf("linearizability violation names no key: %v", v)
				}
			}
			for _, p := range tc.want {
				if !got[p] {
					t.Errorf("%s not flagged; violations: %v", p, r.Violations)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("flagged %v, want exactly %v", r.Violations, tc.want)
			}
			if !errors.Is(r.Err(), check.ErrViolation) {
				t.Errorf("Err() = %v, want ErrViolation", r.Err())
			}
		})
	}
}

// TestCheckerAcceptsCorrectHistories: what a correct service may do — expire
// a lock after its lease, release a ghost lock, apply an unanswered call late —
// is never flagged.
func TestCheckerAcceptsCorrectHistories(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		build func(h *hist)
	}{
		{
			// Seen in a fault run (hashicorp): a's waiting Acquire went through a
			// node that was paused while it held the reply. Token 1 was granted,
			// its lease ran out unseen, b got token 2 and renewed it; then the
			// paused node delivered token 1, after a's own deadline (call +
			// lease): a receives a lease already over and must treat it as lost
			// (the SDK's Done fires at once). Never certainly alive, it overlaps
			// nothing.
			name: "grant_delivered_after_its_lease_ran_out",
			build: func(h *hist) {
				h.acquireWait(0, "k", "a", 1000, 0, 3000, 1)
				h.acquireWait(1, "k", "b", 1000, 0, 2000, 2)
				h.renew(1, "k", 2, 1000, history.OK, 2900, 2910)
			},
		},
		{
			name: "expiry_after_lease",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 1000, 0, 10, 1)
				h.getHeld(1, "k", 1, "a", 900, 910)
				h.acquire(1, "k", "b", 1000, 1200, 1210, 2)
			},
		},
		{
			name: "expiry_seen_by_get_and_renew_refused",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 1000, 0, 10, 1)
				h.renew(0, "k", 1, 1000, history.Fail, 1001, 1005)
				h.getHeld(1, "k", 1, "a", 1006, 1010)
				h.getFree(1, "k", 1100, 1110)
				h.checkToken(1, "k", 1, false, 0, 1120, 1130)
			},
		},
		{
			name: "ghost_lock_released",
			build: func(h *hist) {
				h.acquireUnknown(0, "k", "a", 10000, 0, 1000)
				h.getHeld(1, "k", 4, "a", 100, 110)
				h.getFree(1, "k", 200, 210)
				h.acquire(1, "k", "b", 1000, 300, 310, 5)
			},
		},
		{
			name: "unknown_acquire_applies_late",
			build: func(h *hist) {
				h.acquireUnknown(0, "k", "a", 1000, 0, 100)
				h.getFree(1, "k", 200, 210)
				h.getHeld(1, "k", 3, "a", 300, 310)
				h.acquireHeld(1, "k", "b", 320, 330)
				h.acquire(1, "k", "b", 1000, 1400, 1410, 4)
			},
		},
		{
			name: "unknown_acquire_never_applies",
			build: func(h *hist) {
				h.acquireUnknown(0, "k", "a", 1000, 0, 100)
				h.acquire(1, "k", "b", 1000, 200, 210, 1)
			},
		},
		{
			name: "idempotent_retry",
			build: func(h *hist) {
				h.acquireUnknown(0, "k", "a", 1000, 0, 100)
				h.acquire(0, "k", "a", 1000, 150, 160, 1)
				h.checkToken(1, "k", 1, true, 1, 170, 180)
				h.release(0, "k", 1, history.OK, 200, 210)
				h.release(0, "k", 1, history.Fail, 220, 230)
				h.getFree(1, "k", 240, 250)
			},
		},
		{
			name: "concurrent_acquires_one_wins",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 1000, 0, 100, 1)
				h.acquireHeld(1, "k", "b", 10, 90)
				h.checkToken(2, "k", 9, false, 1, 50, 120)
			},
		},
		{
			name: "waiting_acquire_granted_on_release",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 1000, 0, 10, 1)
				h.acquireWait(1, "k", "b", 1000, 100, 1500, 2)
				h.release(0, "k", 1, history.OK, 500, 510)
				h.getHeld(2, "k", 2, "b", 1600, 1610)
			},
		},
		{
			name: "unknown_release_takes_effect",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 10000, 0, 10, 1)
				h.release(0, "k", 1, history.Unknown, 100, 1100)
				h.acquire(1, "k", "b", 1000, 300, 310, 2)
			},
		},
		{
			name: "renew_keeps_lock_past_first_lease",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 1000, 0, 10, 1)
				h.renew(0, "k", 1, 1000, history.OK, 800, 810)
				h.getHeld(1, "k", 1, "a", 1500, 1510).Tag = check.TagFinal
				h.acquire(1, "k", "b", 1000, 1900, 1910, 2)
			},
		},
		{
			name: "tokens_increase_across_keys",
			build: func(h *hist) {
				h.acquire(0, "k1", "a", 1000, 0, 10, 1)
				h.acquire(1, "k2", "b", 1000, 5, 15, 2)
				h.acquire(2, "k3", "c", 1000, 6, 7, 3) // concurrent: any order
				h.acquireUnknown(3, "k4", "d", 1000, 1, 2)
				h.acquire(3, "k4", "d", 1000, 30, 40, 4) // retry; granted at any time after 1
			},
		},
		{
			name: "check_token_invalid_once_lease_ran_out",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 1000, 0, 10, 1)
				h.checkToken(1, "k", 1, false, 1, 1100, 1110)
				h.getHeld(1, "k", 1, "a", 1120, 1130)
			},
		},
		{
			name: "check_token_invalid_for_ghost",
			build: func(h *hist) {
				h.acquireUnknown(0, "k", "a", 1000, 0, 100)
				h.checkToken(1, "k", 7, false, 7, 50, 60)
			},
		},
		{
			name: "final_read_after_lease_sees_free",
			build: func(h *hist) {
				h.acquire(0, "k", "a", 1000, 0, 10, 1)
				h.getFree(1, "k", 2000, 2010).Tag = check.TagFinal
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var h hist
			tc.build(&h)
			r := check.Run(check.Input{Ops: h.ops, Timeout: time.Minute})
			require.Equal(t, porcupine.Ok, r.Linearizability.Result)
			require.NoError(t, r.Err())
		})
	}
}

func TestLiveness(t *testing.T) {
	t.Parallel()
	w := check.LivenessWindow{Stopped: 1000 * ms, Healed: 3000 * ms, LeaseMS: 1000, FailoverBound: 2 * time.Second}
	// Deadline: 3000 + 1000 + 2000 = 6000ms.
	cases := []struct {
		name    string
		call    int64
		flagged bool
	}{
		{"held_before_deadline", 5900, false},
		{"held_after_deadline", 6100, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var h hist
			h.acquire(0, "k", "a", 1000, 0, 10, 1)
			h.getHeld(1, "k", 1, "a", tc.call, tc.call+10).Tag = check.TagLiveness
			got := check.Liveness(h.ops, w)
			require.Equal(t, tc.flagged, len(got) > 0, "%v", got)
		})
	}
}

// TestReportWrite: a failing report leaves the history, the violations and
// porcupine's visualisation on disk, and the history reads back.
func TestReportWrite(t *testing.T) {
	t.Parallel()
	var h hist
	h.acquire(0, "k", "a", 1000, 0, 10, 1)
	h.acquire(1, "k", "b", 1000, 100, 110, 2)
	r := check.Run(check.Input{Ops: h.ops, Timeout: time.Minute})
	require.Error(t, r.Err())
	dir := t.TempDir()
	require.NoError(t, r.Write(dir, h.ops, []porcupine.Annotation{{Tag: "nemesis", Start: 50 * ms, End: 60 * ms, Description: "kill n1"}}))
	html, err := os.ReadFile(filepath.Join(dir, "linearizability.html"))
	require.NoError(t, err)
	require.Contains(t, string(html), "kill n1")
	v, err := os.ReadFile(filepath.Join(dir, "violations.txt"))
	require.NoError(t, err)
	require.Contains(t, string(v), string(check.PropLease))
	f, err := os.Open(filepath.Join(dir, "history.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	back, err := history.Read(f)
	require.NoError(t, err)
	require.Equal(t, h.ops, back)
}
