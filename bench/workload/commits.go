package workload

import (
	"context"
	"errors"
	"fmt"

	"github.com/ticketd/ticketd/bench/load"
	"github.com/ticketd/ticketd/core"
)

// Sentinel errors of package workload.
var (
	// ErrUnexpected: an operation returned a result other than the one the
	// workload expects (a Grant not granted, a Release that found no lock).
	ErrUnexpected = errors.New("workload: unexpected result")
	// ErrNoLeader: no node is known to lead.
	ErrNoLeader = errors.New("workload: no leader")
)

// LeaseMS is the lease of every lock the workloads take, in milliseconds:
// long enough that no lock expires during a measurement.
const LeaseMS = 60_000

// Commits returns an Op for workers workers that each alternate a Grant and a
// Release of the key "bench/<prefix>/w<i>" as owner "ticketbench-<prefix>-w<i>",
// proposed to leader(). leader returns nil when no leader is known (the
// operation then fails with ErrNoLeader).
//
// A Grant of a key the same owner already holds (left from an earlier run with
// the same prefix) is granted again with its token, so runs can be chained on
// one cluster.
//
// Each worker keeps its key's token in its own slot, so the Op must be driven
// as load.Run does: calls for one worker never overlap, calls for different
// workers may. Errors of the Op: ErrNoLeader, ErrUnexpected, or Propose's
// error wrapped with "grant: " or "release: ".
func Commits(leader func() core.Consensus, workers int, prefix string) load.Op {
	type state struct {
		key, owner string
		token      uint64 // 0: not held
	}
	states := make([]state, workers)
	for i := range states {
		states[i] = state{key: fmt.Sprintf("bench/%s/w%d", prefix, i), owner: fmt.Sprintf("ticketbench-%s-w%d", prefix, i)}
	}
	return func(ctx context.Context, w int) error {
		st := &states[w]
		node := leader()
		if node == nil {
			return ErrNoLeader
		}
		if st.token == 0 {
			res, err := node.Propose(ctx, core.Grant(st.key, LeaseMS, st.owner))
			if err != nil {
				return fmt.Errorf("grant: %w", err)
			}
			if res.Outcome != core.OutcomeGranted {
				return fmt.Errorf("%w: grant %s: %v", ErrUnexpected, st.key, res.Outcome)
			}
			st.token = res.Token
			return nil
		}
		res, err := node.Propose(ctx, core.Release(st.key, st.token))
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		if res.Outcome != core.OutcomeReleased {
			return fmt.Errorf("%w: release %s token %d: %v", ErrUnexpected, st.key, st.token, res.Outcome)
		}
		st.token = 0
		return nil
	}
}
