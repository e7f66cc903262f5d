package suite

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/bench/backendcluster"
	"github.com/ticketd/ticketd/bench/load"
	"github.com/ticketd/ticketd/bench/report"
	"github.com/ticketd/ticketd/bench/workload"
)

// snapshotsOff is a snapshot threshold no run reaches: snapshots and log
// compaction never happen.
const snapshotsOff = 1 << 40

// snapshots measures the commit workload at report.AimSnapshotConcurrency
// clients on t's backend with t's log store twice, each on a fresh
// cluster: with the default snapshot threshold and with snapshotsOff, in
// an order alternating by round, as system t.system().
func (r *runner) snapshots(ctx context.Context, round int, t commitTarget) error {
	backend := t.system()
	type variant struct {
		workload  string
		threshold uint64 // 0: the backend's default
	}
	variants := rotate([]variant{{report.WorkloadSnapshotsOn, 0}, {report.WorkloadSnapshotsOff, snapshotsOff}}, round-1)
	n := report.AimSnapshotConcurrency
	for _, v := range variants {
		what := r.label(round, v.workload, backend, report.Clients(n))
		r.progress.Step(what)
		c, err := backendcluster.Start(ctx, backendcluster.Config{
			New: newBackend[t.backend],
			Dir: filepath.Join(r.dir, fmt.Sprintf("r%d-%s-%s-%s", round, v.workload, t.backend, t.store)),
			Tune: func(cfg *backends.Config) {
				r.cfg.Timing.tune(cfg)
				cfg.LogStore = t.store
				if v.threshold != 0 {
					cfg.SnapshotThreshold = v.threshold
				}
			},
		})
		if err != nil {
			if err := r.failed(ctx, what+" · start cluster", err); err != nil {
				return err
			}
			continue
		}
		res, err := load.Run(ctx, r.inProcess(n), workload.Commits(c.Leader, n, fmt.Sprintf("r%ds%d", round, n)))
		r.closeCluster(c, what+" · close cluster")
		if err != nil {
			if err := r.failed(ctx, what, err); err != nil {
				return err
			}
			continue
		}
		r.add(round, v.workload, backend, res)
	}
	return nil
}
