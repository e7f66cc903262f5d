package suite

import (
	"context"
	"fmt"

	"github.com/ticketd/ticketd/bench/report"
)

// handoffs measures the contended handoff workload on c (a ticketd cluster
// of backend) at every handoff level, each on a key of its own, counting the
// elections around each level.
func (r *runner) handoffs(ctx context.Context, round int, backend string, c lockCluster) error {
	levels := r.cfg.handoffLevels()
	for i, n := range levels {
		what := r.label(round, report.WorkloadHandoff, report.Label(report.WorkloadHandoff, backend), report.Clients(n))
		r.progress.Step(what)
		before := r.term(ctx, c)
		res, err := r.clients(ctx, c, report.WorkloadHandoff, n, fmt.Sprintf("r%dh%d", round, n))
		r.elections(ctx, c, round, report.WorkloadHandoff, backend, n, before)
		if err != nil {
			r.progress.Skip(len(levels) - i - 1)
			return r.failed(ctx, what, err)
		}
		r.add(round, report.WorkloadHandoff, backend, res)
	}
	return nil
}

// peerHandoffs runs the etcd peer's handoff workload (one Mutex prefix).
func (r *runner) peerHandoffs(ctx context.Context, round int) error {
	return r.peerWorkloadAt(ctx, round, report.WorkloadHandoff, "handoff", r.cfg.handoffLevels())
}
