package suite

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/ticketd/ticketd/bench/load"
	"github.com/ticketd/ticketd/bench/report"
	"github.com/ticketd/ticketd/bench/workload"
)

// renewRound measures the renew workload (issue 15: every Renew is a
// replicated command) on every backend and, with the peer, etcd's
// LeaseKeepAlive, in the same round, in an order rotated per round.
func (r *runner) renewRound(ctx context.Context, round int) error {
	systems := append([]string(nil), r.cfg.Backends...)
	if r.cfg.Peer {
		systems = append(systems, report.SystemEtcdKeepAlive)
	}
	for _, s := range rotate(systems, round-1) {
		var err error
		if s == report.SystemEtcdKeepAlive {
			err = r.peerWorkload(ctx, round, report.WorkloadRenew, "keepalive")
		} else {
			err = r.renews(ctx, round, s)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// renews measures the renew workload through ticketd's API on a fresh
// cluster of backend, at every concurrency level; each level first acquires
// one lock per client (not timed).
func (r *runner) renews(ctx context.Context, round int, backend string) error {
	c, err := startLockCluster(ctx, backend, filepath.Join(r.dir, fmt.Sprintf("r%d-renew-%s", round, backend)), r.cfg.Timing)
	if err != nil {
		r.progress.Skip(len(r.cfg.Concurrency))
		return r.failed(ctx, r.label(round, "renew", backend, "start ticketd cluster"), err)
	}
	defer r.closeCluster(c, r.label(round, "renew", backend, "close ticketd cluster"))
	var setupErr error
	r.watch = c
	defer func() { r.watch = nil }()
	err = r.levels(ctx, round, report.WorkloadRenew, backend, func(n int, prefix string) load.Op {
		op, err := workload.Renews(ctx, c.Client(), n, prefix)
		if err != nil {
			setupErr = err
			return func(context.Context, int) error { return err }
		}
		return op
	})
	if setupErr != nil && err == nil {
		r.note("%s: %v", r.label(round, "renew", backend, "acquire the locks to renew"), setupErr)
	}
	return err
}
