package check_test

import (
	"os"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ticketd/ticketd/faults/check"
)

// TestSimulatedCorrectServicePasses: concurrent histories of a correct lock
// service, with expiry, ghost locks, waiting acquires and unanswered calls,
// are never flagged, and porcupine decides each within its time limit.
func TestSimulatedCorrectServicePasses(t *testing.T) {
	t.Parallel()
	sizes := []struct{ seeds, clients, keys, ops int }{{40, 6, 3, 80}, {3, 10, 4, 400}}
	for _, size := range sizes {
		for seed := int64(1); seed <= int64(size.seeds); seed++ {
			checkCorrectSim(t, seed, size.clients, size.keys, size.ops)
		}
	}
}

func checkCorrectSim(t *testing.T, seed int64, clients, keys, opsPerClient int) {
	t.Helper()
	ops := simulate(seed, "", clients, keys, opsPerClient)
	r := check.Run(check.Input{Ops: ops, Timeout: time.Minute})
	if r.Linearizability.Result != porcupine.Ok || r.Err() != nil {
		dir, err := os.MkdirTemp("", "check-sim-")
		if err == nil {
			err = r.Write(dir, ops, nil)
		}
		t.Fatalf("seed %d (%d clients, %d keys, %d ops each): %s, %v (report in %s, %v)",
			seed, clients, keys, opsPerClient, resultString(r.Linearizability.Result), r.Err(), dir, err)
	}
}

// TestSimulatedBugsAreFlagged: the same workload against a service with one
// injected bug is flagged for every seed, by the properties that bug breaks.
func TestSimulatedBugsAreFlagged(t *testing.T) {
	t.Parallel()
	cases := []struct {
		bug  string
		want check.Property
	}{
		{"early_expiry", check.PropLinearizable},
		{"double_grant", check.PropLease},
		{"lost_release", check.PropLinearizable},
		{"lost_grant", check.PropLinearizable},
		{"token_reuse", check.PropFencing},
		{"stale_read", check.PropLinearizable},
		{"ignore_renew", check.PropLease},
		{"stale_renew_refusal", check.PropLinearizable},
	}
	for _, tc := range cases {
		t.Run(tc.bug, func(t *testing.T) {
			t.Parallel()
			for seed := int64(1); seed <= 10; seed++ {
				ops := simulate(seed, tc.bug, 6, 3, 80)
				r := check.Run(check.Input{Ops: ops, Timeout: time.Minute})
				if !properties(r)[tc.want] {
					t.Errorf("seed %d: %s not flagged (linearizability %s): %v", seed, tc.want, resultString(r.Linearizability.Result), r.Violations)
				}
			}
		})
	}
}

func resultString(r porcupine.CheckResult) string {
	switch r {
	case porcupine.Ok:
		return "ok"
	case porcupine.Illegal:
		return "illegal"
	}
	return "unknown"
}
