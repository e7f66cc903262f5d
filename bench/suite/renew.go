package suite

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/ticketd/ticketd/bench/load"
	"github.com/ticketd/ticketd/bench/report"
)

// renewRound measures the renew workload (every Renew is a
// replicated command) on every backend and, with the peer, etcd's
// LeaseKeepAlive, in the same round, in an order rotated per round.
func (r *runner) renewRound(ctx context.Context, round int) error {
	return r.renewalRound(ctx, round, report.WorkloadRenew, "keepalive", 0)
}

// keepAliveRound measures the keepalive workload: sessions of
// report.KeepAliveKeys locks each kept alive by ticketd's SDK (one
// KeepAliveStream per session) on every backend and, with the peer, leases
// of as many keys kept alive on one LeaseKeepAlive stream per lease, as
// clientv3's KeepAlive and concurrency.Session do: a stream on each side,
// in the same round, in an order rotated per round.
func (r *runner) keepAliveRound(ctx context.Context, round int) error {
	return r.renewalRound(ctx, round, report.WorkloadKeepAlive, "session-keepalive-stream", report.KeepAliveKeys)
}

// renewalRound measures workload (renew or keepalive) on every backend, on
// a fresh cluster each, and the peer's peerWorkload with keys keys per
// lease, in an order rotated per round.
func (r *runner) renewalRound(ctx context.Context, round int, workload, peerWorkload string, keys int) error {
	systems := append([]string(nil), r.cfg.Backends...)
	if r.cfg.Peer {
		systems = append(systems, report.SystemEtcdKeepAlive)
	}
	for _, s := range rotate(systems, round-1) {
		var err error
		if s == report.SystemEtcdKeepAlive {
			err = r.peerWorkloadKeys(ctx, round, workload, peerWorkload, r.cfg.Concurrency, keys)
		} else {
			err = r.renewals(ctx, round, workload, s)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// renewals measures workload (renew or keepalive) through ticketd's API on
// a fresh cluster of backend, at every concurrency level; each level first
// takes the locks (and sessions) to renew, not timed, in the client
// process.
func (r *runner) renewals(ctx context.Context, round int, workload, backend string) error {
	c, err := startLockCluster(ctx, backend, filepath.Join(r.dir, fmt.Sprintf("r%d-%s-%s", round, workload, backend)), r.cfg.Timing)
	if err != nil {
		r.progress.Skip(len(r.cfg.Concurrency))
		return r.failed(ctx, r.label(round, workload, backend, "start ticketd cluster"), err)
	}
	defer r.closeCluster(c, r.label(round, workload, backend, "close ticketd cluster"))
	r.watch = c
	defer func() { r.watch = nil }()
	return r.levels(ctx, round, workload, backend, func(n int, prefix string) (load.Result, error) {
		return r.clients(ctx, c, workload, n, prefix)
	})
}
