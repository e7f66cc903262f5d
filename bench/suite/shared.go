package suite

import (
	"context"
	"fmt"

	"github.com/ticketd/ticketd/bench/report"
	"github.com/ticketd/ticketd/bench/workload"
)

// holdings are the shared-locks benchmark's cases with the
// report workload of each, in the order they run at every level.
var holdings = []struct {
	h        workload.Holding
	workload string
}{
	{workload.HoldDistinct, report.WorkloadDistinctKeys},
	{workload.HoldExclusive, report.WorkloadExclusiveKey},
	{workload.HoldShared, report.WorkloadSharedKey},
	{workload.HoldSemaphore, report.WorkloadSemaphoreKey},
}

// shared measures the shared-locks benchmark on c (a ticketd cluster of
// backend): at every shared level, in increasing order, each case of
// holdings back to back on a key (or keys) of its own, so the cases of one
// level meet the same cluster state and machine load, and the ratios of the
// report compare neighbours. Elections are counted around each
// measurement. A failed measurement is noted and ends the series.
func (r *runner) shared(ctx context.Context, round int, backend string, c lockCluster) error {
	levels := r.cfg.sharedLevels()
	total := len(levels) * len(holdings)
	done := 0
	for _, n := range levels {
		for _, hc := range holdings {
			what := r.label(round, hc.workload, report.Label(hc.workload, backend), report.Clients(n))
			r.progress.Step(what)
			done++
			before := r.term(ctx, c)
			res, err := r.clients(ctx, c, hc.workload, n, fmt.Sprintf("r%ds%d", round, n))
			r.elections(ctx, c, round, hc.workload, backend, n, before)
			if err != nil {
				r.progress.Skip(total - done)
				return r.failed(ctx, what, err)
			}
			if res.Errors > 0 && res.Ops == 0 {
				// Every cycle failed (a server without shared locks answers
				// invalid_argument or unimplemented): note it and go on with
				// the other cases, whose figures stand on their own.
				r.note("%s: every cycle failed: %s", what, res.FirstError)
			}
			r.add(round, hc.workload, backend, res)
		}
	}
	return nil
}
