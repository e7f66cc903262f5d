package suite

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/ticketd/ticketd/sdk"

	"github.com/ticketd/ticketd/bench/failover"
	"github.com/ticketd/ticketd/bench/report"
)

// failovers runs the failover measurement on every backend: a cluster of
// three ticketd processes, FailoverKills kill -9s of its leader.
func (r *runner) failovers(ctx context.Context) error {
	bin, err := failover.Build(ctx, r.cfg.RepoRoot, filepath.Join(r.dir, "bin"))
	if err != nil {
		r.progress.Skip(len(r.cfg.Backends))
		return r.failed(ctx, "failover: build ticketd", err)
	}
	kills := r.cfg.FailoverKills
	if kills == 0 {
		kills = 5
	}
	for _, b := range r.cfg.Backends {
		what := fmt.Sprintf("failover · %s · %d kill -9s of the leader", b, kills)
		r.progress.Step(what)
		fc := failover.Config{
			Binary: bin, Backend: b, Dir: filepath.Join(r.dir, "failover-"+b), Kills: kills,
			Args: append(r.cfg.Timing.args(), r.cfg.FailoverArgs...),
			Logf: func(format string, args ...any) {
				r.progress.Note(fmt.Sprintf("failover · %s · ", b) + fmt.Sprintf(format, args...))
			},
		}
		if m := r.cfg.FailoverBackoffMax; m > 0 {
			fc.SDKOptions = append(fc.SDKOptions, sdk.WithBackoff(min(sdk.DefaultBackoffBase, m), m))
		}
		res, err := failover.Run(ctx, fc)
		for i, k := range res.Kills {
			f := report.Failover{System: b, Kill: i + 1, MS: k.MS()}
			if k.Err != nil {
				f.MS, f.Err = 0, k.Err.Error()
			}
			r.rep.Failovers = append(r.rep.Failovers, f)
		}
		r.rep.CPU = append(r.rep.CPU, res.CPU...)
		if err != nil {
			if err := r.failed(ctx, what, err); err != nil {
				return err
			}
		}
	}
	return nil
}
