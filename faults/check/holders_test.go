package check_test

import (
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/faults/check"
	"github.com/ticketd/ticketd/faults/history"
)

// TestHoldersCheckerFlagsBugs: histories of shared locks, semaphores and
// sessions that a buggy service could produce are flagged, each
// by the properties it breaks.
func TestHoldersCheckerFlagsBugs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		build func(h *hist)
		want  []check.Property
	}{
		{
			// A third holder of a limit-2 semaphore while both others hold it.
			name: "third_holder_of_limit_2_semaphore",
			build: func(h *hist) {
				h.acquireM(0, "sem", "a", sem(2), 1000, 0, 10, 1)
				h.acquireM(1, "sem", "b", sem(2), 1000, 20, 30, 2)
				h.acquireM(2, "sem", "c", sem(2), 1000, 40, 50, 3)
			},
			want: []check.Property{check.PropLinearizable, check.PropLimit},
		},
		{
			name: "get_sees_three_holders_of_limit_2",
			build: func(h *hist) {
				h.acquireM(0, "sem", "a", sem(2), 1000, 0, 10, 1)
				h.acquireM(1, "sem", "b", sem(2), 1000, 0, 10, 2)
				h.acquireUnknownM(2, "sem", "c", sem(2), 1000, 0, 10)
				h.getM(3, "sem", sem(2), 20, 30, hd(1, "a"), hd(2, "b"), hd(3, "c"))
			},
			want: []check.Property{check.PropLinearizable},
		},
		{
			// A shared grant beside an exclusive holder within its lease.
			name: "shared_grant_beside_exclusive_holder",
			build: func(h *hist) {
				h.acquireM(0, "rw", "w", excl, 1000, 0, 10, 1)
				h.acquireM(1, "rw", "r", shared, 1000, 20, 30, 2)
			},
			want: []check.Property{check.PropLinearizable, check.PropLease},
		},
		{
			name: "exclusive_grant_beside_shared_holders",
			build: func(h *hist) {
				h.acquireM(0, "rw", "r1", shared, 1000, 0, 10, 1)
				h.acquireM(1, "rw", "r2", shared, 1000, 0, 10, 2)
				h.acquireM(2, "rw", "w", excl, 1000, 20, 30, 3)
			},
			want: []check.Property{check.PropLinearizable, check.PropLease},
		},
		{
			// Two shared holders given the same token.
			name: "duplicated_token",
			build: func(h *hist) {
				h.acquireM(0, "rw", "r1", shared, 1000, 0, 10, 1)
				h.acquireM(1, "rw", "r2", shared, 1000, 20, 30, 1)
			},
			want: []check.Property{check.PropLinearizable, check.PropFencing},
		},
		{
			// A later shared grant with a smaller token than an acknowledged one.
			name: "shared_tokens_decrease",
			build: func(h *hist) {
				h.acquireM(0, "rw", "r1", shared, 1000, 0, 10, 5)
				h.acquireM(1, "rw", "r2", shared, 1000, 20, 30, 4)
			},
			want: []check.Property{check.PropLinearizable, check.PropFencing},
		},
		{
			// A shared request refused as held though only shared holders hold the key.
			name: "shared_refused_beside_shared",
			build: func(h *hist) {
				h.acquireM(0, "rw", "r1", shared, 1000, 0, 10, 1)
				h.acquireRefusedM(1, "rw", "r2", shared, connect.CodeAlreadyExists, 20, 30)
			},
			want: []check.Property{check.PropLinearizable},
		},
		{
			name: "semaphore_refused_with_a_free_slot",
			build: func(h *hist) {
				h.acquireM(0, "sem", "a", sem(2), 1000, 0, 10, 1)
				h.acquireRefusedM(1, "sem", "b", sem(2), connect.CodeAlreadyExists, 20, 30)
			},
			want: []check.Property{check.PropLinearizable},
		},
		{
			// LimitMismatch while the key's holders have the same limit.
			name: "limit_mismatch_with_same_limit",
			build: func(h *hist) {
				h.acquireM(0, "sem", "a", sem(2), 1000, 0, 10, 1)
				h.acquireRefusedM(1, "sem", "b", sem(2), connect.CodeFailedPrecondition, 20, 30).KeyLimit = 2
			},
			want: []check.Property{check.PropLinearizable},
		},
		{
			name: "check_token_invalid_for_live_shared_holder",
			build: func(h *hist) {
				h.acquireM(0, "rw", "r1", shared, 1000, 0, 10, 1)
				h.acquireM(1, "rw", "r2", shared, 1000, 0, 10, 2)
				h.add(history.Op{Client: 2, Kind: history.CheckToken, Key: "rw", Token: 1, Outcome: history.OK, HolderToken: 2, KeyShared: true}, 20, 30)
			},
			want: []check.Property{check.PropLinearizable},
		},
		{
			// A lock under a kept-alive session is granted to another owner.
			name: "grant_within_session_lease",
			build: func(h *hist) {
				h.createSession(0, 9, 1000, 0, 10)
				h.acquireM(0, "s", "a", under(9), 0, 20, 30, 1)
				h.keepAlive(0, 9, 1000, history.OK, 800, 810)
				h.acquireM(1, "s", "b", excl, 1000, 1500, 1510, 2)
			},
			want: []check.Property{check.PropLinearizable, check.PropLease},
		},
		{
			// An Acquire under a session called after its CloseSession returned is granted.
			name: "acquire_under_closed_session",
			build: func(h *hist) {
				h.createSession(0, 9, 10000, 0, 10)
				h.closeSession(0, 9, history.OK, 20, 30)
				h.acquireM(0, "s", "a", under(9), 0, 40, 50, 1)
			},
			want: []check.Property{check.PropLinearizable},
		},
		{
			// A Get reports a holder under another session than it was acquired under.
			name: "holder_under_wrong_session",
			build: func(h *hist) {
				h.createSession(0, 9, 10000, 0, 10)
				h.acquireM(0, "s", "a", under(9), 0, 20, 30, 1)
				h.getM(1, "s", excl, 40, 50, hd(1, "a")).Holders[0].Session = 8
			},
			want: []check.Property{check.PropLinearizable},
		},
		{
			// A Get called after CloseSession returned still sees its lock.
			name: "lock_outlives_closed_session",
			build: func(h *hist) {
				h.createSession(0, 9, 10000, 0, 10)
				h.acquireM(0, "s", "a", under(9), 0, 20, 30, 1)
				h.closeSession(0, 9, history.OK, 40, 50)
				h.getM(1, "s", excl, 60, 70, hd(1, "a")).Holders[0].Session = 9
			},
			want: []check.Property{check.PropLinearizable},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var h hist
			tc.build(&h)
			r := check.Run(check.Input{Ops: h.ops, Timeout: time.Minute})
			got := properties(r)
			for _, p := range tc.want {
				if !got[p] {
					t.Errorf("%s not flagged; violations: %v", p, r.Violations)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("flagged %v, want exactly %v", r.Violations, tc.want)
			}
		})
	}
}

// TestHoldersCheckerAcceptsCorrectHistories: what a correct service does
// with shared locks, semaphores and sessions is never flagged.
func TestHoldersCheckerAcceptsCorrectHistories(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		build func(h *hist)
	}{
		{
			name: "shared_holders_coexist",
			build: func(h *hist) {
				h.acquireM(0, "rw", "r1", shared, 1000, 0, 10, 1)
				h.acquireM(1, "rw", "r2", shared, 1000, 5, 15, 2)
				h.getM(2, "rw", shared, 20, 30, hd(1, "r1"), hd(2, "r2"))
				h.add(history.Op{Client: 2, Kind: history.CheckToken, Key: "rw", Token: 1, Outcome: history.OK, Valid: true, HolderToken: 2, KeyShared: true}, 40, 50)
				h.acquireRefusedM(3, "rw", "w", excl, connect.CodeAlreadyExists, 60, 70)
				h.release(0, "rw", 1, history.OK, 80, 90)
				h.release(1, "rw", 2, history.OK, 100, 110)
				h.acquireM(3, "rw", "w", excl, 1000, 120, 130, 3)
				h.getM(2, "rw", excl, 140, 150, hd(3, "w"))
			},
		},
		{
			// A waiting writer is granted once both readers released; a
			// reader arriving while it waits is granted after it.
			name: "writer_waits_for_readers",
			build: func(h *hist) {
				h.acquireM(0, "rw", "r1", shared, 1000, 0, 10, 1)
				h.acquireM(1, "rw", "r2", shared, 1000, 0, 10, 2)
				h.add(history.Op{Client: 2, Kind: history.Acquire, Key: "rw", Owner: "w", LeaseMS: 1000, Wait: true,
					Outcome: history.OK, Token: 3, ResLeaseMS: 1000}, 20, 200)
				h.add(history.Op{Client: 3, Kind: history.Acquire, Key: "rw", Owner: "r3", LeaseMS: 1000, Wait: true, Shared: true,
					Outcome: history.OK, Token: 4, ResLeaseMS: 1000}, 30, 400)
				h.release(0, "rw", 1, history.OK, 100, 110)
				h.release(1, "rw", 2, history.OK, 150, 160)
				h.release(2, "rw", 3, history.OK, 300, 310)
			},
		},
		{
			name: "semaphore_of_two",
			build: func(h *hist) {
				h.acquireM(0, "sem", "a", sem(2), 1000, 0, 10, 1)
				h.acquireM(1, "sem", "b", sem(2), 1000, 0, 10, 2)
				h.acquireRefusedM(2, "sem", "c", sem(2), connect.CodeAlreadyExists, 20, 30)
				h.acquireRefusedM(3, "sem", "d", sem(3), connect.CodeFailedPrecondition, 20, 30).KeyLimit = 2
				h.getM(4, "sem", sem(2), 35, 38, hd(1, "a"), hd(2, "b"))
				h.release(0, "sem", 1, history.OK, 40, 50)
				h.acquireM(2, "sem", "c", sem(2), 1000, 60, 70, 3)
				h.getM(4, "sem", sem(2), 80, 90, hd(2, "b"), hd(3, "c"))
			},
		},
		{
			// LimitMismatch on a free key: a waiter with another limit the model cannot see.
			name: "limit_mismatch_on_free_key",
			build: func(h *hist) {
				h.acquireRefusedM(0, "sem", "a", sem(2), connect.CodeFailedPrecondition, 0, 10).KeyLimit = 3
				h.acquireM(1, "sem", "b", sem(3), 1000, 20, 30, 1)
			},
		},
		{
			name: "semaphore_slot_expires",
			build: func(h *hist) {
				h.acquireM(0, "sem", "a", sem(1), 1000, 0, 10, 1)
				h.renew(0, "sem", 1, 1000, history.Fail, 1100, 1110)
				h.acquireM(1, "sem", "b", sem(1), 1000, 1200, 1210, 2)
			},
		},
		{
			name: "unknown_shared_acquire_observed_then_released",
			build: func(h *hist) {
				h.acquireUnknownM(0, "rw", "r1", shared, 1000, 0, 100)
				h.acquireM(1, "rw", "r2", shared, 1000, 50, 60, 5)
				h.getM(2, "rw", shared, 70, 80, hd(4, "r1"), hd(5, "r2"))
				h.getM(2, "rw", shared, 90, 95, hd(5, "r2"))
				h.acquireM(0, "rw", "r1", shared, 1000, 150, 160, 6)
			},
		},
		{
			name: "retry_returns_unobserved_grant",
			build: func(h *hist) {
				h.acquireUnknownM(0, "sem", "a", sem(2), 1000, 0, 100)
				h.acquireM(1, "sem", "b", sem(2), 1000, 50, 60, 5)
				h.acquireM(0, "sem", "a", sem(2), 1000, 150, 160, 4)
				h.getM(2, "sem", sem(2), 170, 180, hd(4, "a"), hd(5, "b"))
			},
		},
		{
			// Two keys under one session: kept alive past the first TTL, then
			// closed; both keys are free after, and the next holder gets them.
			name: "session_keep_alive_and_close",
			build: func(h *hist) {
				h.createSession(0, 9, 1000, 0, 10)
				h.acquireM(0, "s1", "a1", under(9), 0, 20, 30, 1)
				h.acquireM(0, "s2", "a2", under(9), 0, 40, 50, 2)
				h.keepAlive(0, 9, 1000, history.OK, 800, 810)
				h.getM(1, "s1", excl, 1500, 1510, hd(1, "a1")).Holders[0].Session = 9
				h.closeSession(0, 9, history.OK, 1600, 1610)
				h.getM(1, "s1", excl, 1620, 1630)
				h.acquireM(1, "s2", "b", excl, 1000, 1640, 1650, 3)
			},
		},
		{
			// A session not kept alive ends after its TTL, and its locks with it.
			name: "session_expires",
			build: func(h *hist) {
				h.createSession(0, 9, 1000, 0, 10)
				h.acquireM(0, "s1", "a1", under(9), 0, 900, 910, 1)
				h.keepAlive(0, 9, 1000, history.Fail, 1100, 1110)
				h.acquireM(1, "s1", "b", excl, 1000, 1200, 1210, 2)
			},
		},
		{
			// An unanswered CloseSession may end its locks from its call on.
			name: "unknown_close_session",
			build: func(h *hist) {
				h.createSession(0, 9, 10000, 0, 10)
				h.acquireM(0, "s1", "a1", under(9), 0, 20, 30, 1)
				h.closeSession(0, 9, history.Unknown, 100, 5000)
				h.acquireM(1, "s1", "b", excl, 1000, 200, 210, 2)
			},
		},
		{
			// Eight shared holders whose leases ran out (more than the model
			// tries every subset of): a Get sees half of them gone, a
			// CheckToken the newest ones gone, then a semaphore-free grant.
			name: "many_expired_shared_holders_end_one_by_one",
			build: func(h *hist) {
				var seen []history.Holder
				for i := range 8 {
					owner := fmt.Sprintf("r%d", i)
					h.acquireM(i, "rw", owner, shared, 1000, int64(i), int64(i)+10, uint64(i+1))
					if i%2 == 0 {
						seen = append(seen, hd(uint64(i+1), owner))
					}
				}
				h.getM(8, "rw", shared, 1500, 1510, seen...)
				h.add(history.Op{Client: 8, Kind: history.CheckToken, Key: "rw", Token: 3, Outcome: history.OK, HolderToken: 3, KeyShared: true}, 1520, 1530)
				h.acquireM(8, "rw", "w", excl, 1000, 1540, 1550, 9)
			},
		},
		{
			// Six semaphore holders past their leases: the next grant of a
			// limit-6 semaphore needs one slot freed, not all of them.
			name: "full_semaphore_frees_one_slot",
			build: func(h *hist) {
				var seen []history.Holder
				for i := range 7 {
					owner := fmt.Sprintf("s%d", i)
					h.acquireM(i, "sem", owner, sem(7), 1000, int64(i), int64(i)+10, uint64(i+1))
					if i > 0 {
						seen = append(seen, hd(uint64(i+1), owner))
					}
				}
				h.acquireM(8, "sem", "t", sem(7), 1000, 1500, 1510, 8)
				h.getM(8, "sem", sem(7), 1520, 1530, append(seen, hd(8, "t"))...)
			},
		},
		{
			name: "exclusive_ops_on_a_shared_key",
			build: func(h *hist) {
				h.acquireM(0, "rw", "w", excl, 1000, 0, 10, 1)
				h.renew(0, "rw", 1, 1000, history.OK, 500, 510)
				h.acquireRefusedM(1, "rw", "r", shared, connect.CodeAlreadyExists, 520, 530)
				h.checkToken(2, "rw", 1, true, 1, 540, 550)
				h.release(0, "rw", 1, history.OK, 600, 610)
				h.release(0, "rw", 1, history.Fail, 620, 630)
				h.checkToken(2, "rw", 1, false, 0, 640, 650)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var h hist
			tc.build(&h)
			r := check.Run(check.Input{Ops: h.ops, Timeout: time.Minute})
			require.Equal(t, porcupine.Ok, r.Linearizability.Result, "%v", r.Violations)
			require.NoError(t, r.Err())
		})
	}
}
