package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"go.etcd.io/etcd/api/v3/version"

	"github.com/ticketd/ticketd/bench/load"
	"github.com/ticketd/ticketd/bench/loadproc"
	"github.com/ticketd/ticketd/bench/peer"
	"github.com/ticketd/ticketd/bench/report"
)

func main() {
	if loadproc.Serve(measureClients) { // started by run below as the client process
		return
	}
	var (
		levels   = flag.String("concurrency", "1,16,64,256", "comma-separated client counts, measured in order")
		duration = flag.Duration("duration", time.Second, "measured window per level")
		warmup   = flag.Duration("warmup", 500*time.Millisecond, "unrecorded run before each window")
		mode     = flag.String("mode", string(load.ModeClosed), "closed or open")
		rate     = flag.Float64("rate", 0, "open loop: cycles per second")
		dir      = flag.String("dir", "", "where to make the temporary data directory (default: system temp dir)")
		workload = flag.String("workload", "lock", "lock (concurrency.Mutex Lock+Unlock), keepalive (LeaseKeepAlive, one KeepAliveOnce), session-keepalive (one KeepAliveOnce of a lease with -keys keys), session-keepalive-stream (the same on an open LeaseKeepAlive stream) or handoff (N clients, one Mutex prefix: handoffs)")
		keys     = flag.Int("keys", report.KeepAliveKeys, "session-keepalive(-stream): keys attached to each lease")
	)
	flag.Parse()
	if err := run(*workload, *levels, *duration, *warmup, load.Mode(*mode), *rate, *dir, *keys); err != nil {
		fmt.Fprintln(os.Stderr, "etcdpeer:", err)
		os.Exit(1)
	}
}

// systems maps each -workload to the system its figures are reported as.
var systems = map[string]string{
	"lock":              report.SystemEtcdMutex,
	"handoff":           report.SystemEtcdMutex,
	"keepalive":         report.SystemEtcdKeepAlive,
	"session-keepalive": report.SystemEtcdKeepAlive,
	// session-keepalive is run by hand only (see measureSessionKeepAlive).
	"session-keepalive-stream": report.SystemEtcdKeepAlive,
}

// run starts the members in this process and measures every level with the
// clients in a process of their own (package loadproc: this binary again),
// which meters this process's CPU (the members') and its own over each
// window.
func run(workload, levels string, duration, warmup time.Duration, mode load.Mode, rate float64, dir string, keys int) error {
	conc, err := load.ParseLevels(levels)
	if err != nil {
		return fmt.Errorf("-concurrency: %w", err)
	}
	system, ok := systems[workload]
	if !ok {
		return fmt.Errorf("-workload: unknown workload %q", workload)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	c, err := startCluster(ctx, dir)
	if err != nil {
		return err
	}
	defer c.close()

	out := peer.Output{System: system, EtcdVersion: version.Version}
	for _, n := range conc {
		fmt.Fprintf(os.Stderr, "%s%d\n", peer.ProgressPrefix, n)
		res, err := loadproc.Run(ctx, loadproc.Config{}, loadproc.Spec{
			Workload: workload, Target: c.endpoint, Prefix: fmt.Sprintf("c%d", n), Keys: keys,
			Load: load.Config{Mode: mode, Concurrency: n, Duration: duration, Warmup: warmup, Rate: rate},
		})
		if err != nil {
			return fmt.Errorf("concurrency %d: %w", n, err)
		}
		out.Results = append(out.Results, res)
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// measureClients is the client process: it connects to the leader
// (spec.Target) and runs spec's workload.
func measureClients(ctx context.Context, spec loadproc.Spec) (load.Result, error) {
	cli, err := dial(spec.Target)
	if err != nil {
		return load.Result{}, err
	}
	defer cli.Close()
	switch spec.Workload {
	case "lock":
		return measure(ctx, cli, spec.Load)
	case "keepalive":
		return measureKeepAlive(ctx, cli, spec.Load)
	case "session-keepalive", "session-keepalive-stream":
		return measureSessionKeepAlive(ctx, cli, spec.Load, spec.Prefix, spec.Keys, spec.Workload == "session-keepalive-stream")
	case "handoff":
		return measureHandoff(ctx, cli, spec.Load)
	}
	return load.Result{}, fmt.Errorf("unknown workload %q", spec.Workload)
}
