package suite

import (
	"context"
	"fmt"

	"github.com/ticketd/ticketd/sdk"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"

	"github.com/ticketd/ticketd/bench/apicluster"
	"github.com/ticketd/ticketd/bench/handoff"
	"github.com/ticketd/ticketd/bench/load"
	"github.com/ticketd/ticketd/bench/loadproc"
	"github.com/ticketd/ticketd/bench/report"
	"github.com/ticketd/ticketd/bench/workload"
)

// ServeClients makes this process a ticketbench client process when the
// suite started it as one (package loadproc): it then runs one measurement
// of ticketd's API against the cluster the Spec names and exits. Otherwise
// it returns false at once. A program that calls Run must call it first
// thing in main (and in TestMain), because Run starts the program's own
// executable as the client process unless Config.Clients says otherwise.
func ServeClients() bool {
	return loadproc.Serve(measureClients)
}

// measureClients runs spec's workload (a report.Workload… name) through
// ticketd's Connect API at spec.Target, the leader's base URL. Errors: an
// unknown workload, the setup's (sessions, locks to renew), load.Run's.
func measureClients(ctx context.Context, spec loadproc.Spec) (load.Result, error) {
	hc := apicluster.HTTPClient()
	client := ticketv1connect.NewLockServiceClient(hc, spec.Target)
	n, prefix := spec.Load.Concurrency, spec.Prefix
	switch spec.Workload {
	case report.WorkloadLock:
		return load.Run(ctx, spec.Load, workload.Locks(client, n, prefix))
	case report.WorkloadRenew:
		op, err := workload.Renews(ctx, client, n, prefix)
		if err != nil {
			return load.Result{}, err
		}
		return load.Run(ctx, spec.Load, op)
	case report.WorkloadKeepAlive:
		// The keep-alives go through the SDK, over one KeepAliveStream per
		// session, on the same HTTP client as the setup's calls.
		keeper, err := sdk.New([]string{spec.Target}, sdk.WithHTTPClient(hc))
		if err != nil {
			return load.Result{}, err
		}
		defer keeper.Close()
		op, closeAll, err := workload.KeepAlives(ctx, client, keeper, n, spec.Keys, prefix)
		if err != nil {
			return load.Result{}, err
		}
		res, err := load.Run(ctx, spec.Load, op)
		if cerr := closeAll(context.WithoutCancel(ctx)); err == nil && cerr != nil {
			return res, fmt.Errorf("after the measurement: %w", cerr)
		}
		return res, err
	case report.WorkloadHandoff:
		return handoff.Measure(ctx, spec.Load, workload.Handoffs(client, prefix))
	}
	for _, hc := range holdings {
		if hc.workload == spec.Workload {
			return load.Run(ctx, spec.Load, workload.Holders(client, n, prefix, hc.h))
		}
	}
	return load.Result{}, fmt.Errorf("unknown workload %q", spec.Workload)
}

// clients runs one measurement of workload at n clients in a client process
// against the node leading c when it starts (as etcd's clients talk to its
// leader), with the CPU of this process (c's nodes) and of the client
// process metered over the window. Errors: the leader lookup's, the client
// process's (loadproc.ErrRun), ctx's.
func (r *runner) clients(ctx context.Context, c lockCluster, workload string, n int, prefix string) (load.Result, error) {
	url, err := c.CurrentLeaderURL(ctx)
	if err != nil {
		return load.Result{}, fmt.Errorf("find the leader: %w", err)
	}
	spec := loadproc.Spec{Workload: workload, Target: url, Prefix: prefix, Load: r.loadConfig(n)}
	if workload == report.WorkloadKeepAlive {
		spec.Keys = report.KeepAliveKeys
	}
	return loadproc.Run(ctx, r.cfg.Clients, spec)
}
