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
	"github.com/ticketd/ticketd/bench/peer"
	"github.com/ticketd/ticketd/bench/report"
)

func main() {
	var (
		levels   = flag.String("concurrency", "1,16,64,256", "comma-separated client counts, measured in order")
		duration = flag.Duration("duration", time.Second, "measured window per level")
		warmup   = flag.Duration("warmup", 500*time.Millisecond, "unrecorded run before each window")
		mode     = flag.String("mode", string(load.ModeClosed), "closed or open")
		rate     = flag.Float64("rate", 0, "open loop: cycles per second")
		dir      = flag.String("dir", "", "where to make the temporary data directory (default: system temp dir)")
		workload = flag.String("workload", "lock", "lock (concurrency.Mutex Lock+Unlock), keepalive (LeaseKeepAlive, one KeepAliveOnce) or handoff (N clients, one Mutex prefix: handoffs)")
	)
	flag.Parse()
	if err := run(*workload, *levels, *duration, *warmup, load.Mode(*mode), *rate, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "etcdpeer:", err)
		os.Exit(1)
	}
}

func run(workload, levels string, duration, warmup time.Duration, mode load.Mode, rate float64, dir string) error {
	conc, err := load.ParseLevels(levels)
	if err != nil {
		return fmt.Errorf("-concurrency: %w", err)
	}
	system, measureFn := report.SystemEtcdMutex, measure
	switch workload {
	case "lock":
	case "keepalive":
		system, measureFn = report.SystemEtcdKeepAlive, measureKeepAlive
	case "handoff":
		measureFn = measureHandoff
	default:
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
		res, err := measureFn(ctx, c, load.Config{Mode: mode, Concurrency: n, Duration: duration, Warmup: warmup, Rate: rate})
		if err != nil {
			return fmt.Errorf("concurrency %d: %w", n, err)
		}
		out.Results = append(out.Results, res)
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
