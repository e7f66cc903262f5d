package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ticketd/ticketd/bench/charts"
	"github.com/ticketd/ticketd/bench/load"
	"github.com/ticketd/ticketd/bench/report"
	"github.com/ticketd/ticketd/bench/scale"
	"github.com/ticketd/ticketd/bench/suite"
)

func main() {
	if suite.ServeClients() { // started by the suite as a client process
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintln(os.Stderr, "ticketbench:", err)
		os.Exit(1)
	}
}

// options are the parsed flags.
type options struct {
	cfg        suite.Config
	out        string
	cpuProfile string
}

// parseFlags parses ticketbench's flags into options and validates them.
// Errors: flag.ErrHelp for -h, or the first bad flag.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("ticketbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o             options
		levels        = fs.String("concurrency", "1,16,64,256", "comma-separated client counts")
		backends      = fs.String("backends", strings.Join(suite.Backends(), ","), "comma-separated ticketd backends")
		logStores     = fs.String("log-stores", strings.Join(suite.LogStores(), ","), "comma-separated Raft log stores the commit and snapshots workloads run on, on each backend that offers them (rows hashicorp for the default store wal, hashicorp/badger, ...); the other workloads use the default store")
		workloads     = fs.String("workloads", "commit,lock,renew,keepalive,handoff,snapshots,failover", "comma-separated workloads: commit (Propose on the leader), lock (Acquire+Release through the API), renew (Renew of a held lock through the API; peer: etcd LeaseKeepAlive), keepalive (KeepAlive of a session holding 10 locks; peer: etcd LeaseKeepAlive on a lease with 10 keys), handoff (N clients on one key, Acquire-wait+Release; peer: etcd Mutex), snapshots (commit p99 with snapshots on vs off), failover (kill -9 of the leader of three ticketd processes), shared (Acquire-wait+Release cycles on one key shared, one key exclusive, one key as a semaphore of limit 8, and distinct keys; added by -quick, else asked for by name), scale (three ticketd processes filled to each of -scale-steps locks and measured there; asked for by name only)")
		handoffLevels = fs.String("handoff-concurrency", "2,8,32", "comma-separated client counts of the handoff workload")
		sharedLevels  = fs.String("shared-concurrency", "1,16,64", "comma-separated client counts of the shared workload")
		quick         = fs.Bool("quick", false, "a run of a few minutes: 1 round of 500ms windows after 200ms warm-up, the shared workload added to the default ones (flags given explicitly win)")
		mode          = fs.String("mode", string(load.ModeClosed), "closed (each client waits for its last operation) or open (fixed -rate, latency from the intended send time)")
		scaleSteps    = fs.String("scale-steps", "10000,100000,1000000", "scale: comma-separated table sizes in exclusive locks, increasing")
		scaleSessions = fs.String("scale-sessions", "10000x100", "scale: SESSIONSxLOCKS sessions each holding LOCKS locks added at the last step (0: none)")
		scaleSettings scale.Settings
	)
	fs.IntVar(&scaleSettings.Clients, "scale-clients", scale.DefaultClients, "scale: SDK clients filling the table (and renewing) at once")
	fs.IntVar(&scaleSettings.Kills, "scale-kills", scale.DefaultKills, "scale: kill -9s of the leader per step")
	fs.IntVar(&scaleSettings.ProbeOps, "scale-probe-ops", scale.DefaultProbeOps, "scale: Acquires of fresh keys timed per step (one client)")
	fs.IntVar(&scaleSettings.Renewals, "scale-renewals", 1_000_000, "scale: renewals of held locks after the last step, then the data dirs are measured again (0: none)")
	fs.DurationVar(&o.cfg.Duration, "duration", time.Second, "measured window of each measurement")
	fs.DurationVar(&o.cfg.Warmup, "warmup", 500*time.Millisecond, "unrecorded run before each window")
	fs.IntVar(&o.cfg.MinOps, "min-ops", 1, "closed loop: a window goes on past -duration until this many operations started in it have succeeded (at most 10s more), so a starved machine still measures something; 0: exactly -duration")
	fs.IntVar(&o.cfg.Rounds, "rounds", 3, "repetitions of every measurement (backend order alternates per round)")
	fs.Float64Var(&o.cfg.Rate, "rate", 0, "open loop: operations per second over all clients")
	fs.BoolVar(&o.cfg.Peer, "peer", true, "also measure etcd itself (three embedded members): concurrency.Mutex for lock, LeaseKeepAlive for renew")
	fs.StringVar(&o.cfg.DataDir, "data-dir", "", "where the clusters' data and the fsync floor file go (default: system temp dir)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this process over the whole run to this file: ticketd's in-process nodes, and the commit workload's proposers (the API workloads' clients run in processes of their own)")
	fs.IntVar(&o.cfg.FailoverKills, "kills", 5, "failover: kill -9s of the leader per backend")
	failoverArgs := fs.String("failover-args", "", "failover: extra space-separated `ticketd serve` flags (e.g. --raft-election-timeout-ms=500); default: the shipped defaults")
	fs.DurationVar(&o.cfg.Timing.ElectionTimeout, "election-timeout", 0, "Raft election timeout of every cluster (0: the shipped default)")
	fs.DurationVar(&o.cfg.Timing.HeartbeatInterval, "heartbeat", 0, "Raft heartbeat interval of every cluster (0: the shipped default)")
	fs.DurationVar(&o.cfg.FailoverBackoffMax, "failover-backoff-max", 0, "failover: cap of the SDK's retry backoff (0: the SDK default)")
	fs.StringVar(&o.out, "out", "", "output directory (default bench/results/<time> from the repository root)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.cfg.FailoverArgs = strings.Fields(*failoverArgs)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["rounds"] {
			o.cfg.Rounds = 1
		}
		if !set["duration"] {
			o.cfg.Duration = 500 * time.Millisecond
		}
		if !set["warmup"] {
			o.cfg.Warmup = 200 * time.Millisecond
		}
	}
	if *quick && !set["workloads"] {
		// The shared workload's 24 measurements add about 17 s to a quick
		// run (0.7 s each) but about 110 s to a default one: quick only.
		o.cfg.Shared = true
	}
	var err error
	if o.cfg.Concurrency, err = load.ParseLevels(*levels); err != nil {
		return o, fmt.Errorf("-concurrency: %w", err)
	}
	if o.cfg.HandoffConcurrency, err = load.ParseLevels(*handoffLevels); err != nil {
		return o, fmt.Errorf("-handoff-concurrency: %w", err)
	}
	if o.cfg.SharedConcurrency, err = load.ParseLevels(*sharedLevels); err != nil {
		return o, fmt.Errorf("-shared-concurrency: %w", err)
	}
	o.cfg.Backends = splitList(*backends)
	o.cfg.LogStores = splitList(*logStores)
	for _, w := range splitList(*workloads) {
		switch w {
		case report.WorkloadCommit:
			o.cfg.Commit = true
		case report.WorkloadLock:
			o.cfg.Lock = true
		case report.WorkloadRenew:
			o.cfg.Renew = true
		case report.WorkloadKeepAlive:
			o.cfg.KeepAlive = true
		case report.WorkloadHandoff:
			o.cfg.Handoff = true
		case "shared":
			o.cfg.Shared = true
		case "snapshots":
			o.cfg.Snapshots = true
		case "failover":
			o.cfg.Failover = true
		case report.WorkloadScale:
			o.cfg.Scale = &scaleSettings
		default:
			return o, fmt.Errorf("-workloads: unknown workload %q", w)
		}
	}
	if o.cfg.Scale != nil {
		if scaleSettings.Steps, err = load.ParseLevels(*scaleSteps); err != nil {
			return o, fmt.Errorf("-scale-steps: %w", err)
		}
		if scaleSettings.Sessions, scaleSettings.SessionLocks, err = parseSessions(*scaleSessions); err != nil {
			return o, fmt.Errorf("-scale-sessions: %w", err)
		}
	}
	o.cfg.Mode = load.Mode(*mode)
	if o.out == "" {
		o.out = defaultOut(time.Now())
	}
	return o, o.cfg.Validate()
}

// defaultOut is bench/results/<time> when run from the repository root (as
// `make bench` does), else results/<time> in the working directory.
func defaultOut(now time.Time) string {
	stamp := now.Format("20060102-150405")
	if fi, err := os.Stat(filepath.Join("bench", "go.mod")); err == nil && !fi.IsDir() {
		return filepath.Join("bench", "results", stamp)
	}
	return filepath.Join("results", stamp)
}

// run is the whole command: parse args, run the suite, print the table on
// stdout and write the report files and plots. It returns the suite's error
// (a cancelled run still writes what was measured) or the first write error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	o.cfg.Progress = stderr
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rep, runErr := suite.Run(ctx, o.cfg)
	if rep == nil {
		return runErr
	}
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if err := rep.Write(o.out); err != nil {
		return err
	}
	files, err := charts.Write(o.out, rep.Summary)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s, %s", filepath.Join(o.out, report.JSONFile), filepath.Join(o.out, report.MarkdownFile))
	for _, f := range files {
		fmt.Fprintf(stderr, ", %s", f)
	}
	fmt.Fprintln(stderr)
	return runErr
}

// parseSessions parses -scale-sessions: "NxM" (N sessions of M locks each)
// or "0" / "" for none.
func parseSessions(s string) (sessions, locks int, err error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return 0, 0, nil
	}
	n, m, ok := strings.Cut(s, "x")
	if ok {
		sessions, err = strconv.Atoi(n)
	}
	if ok && err == nil {
		locks, err = strconv.Atoi(m)
	}
	if !ok || err != nil || sessions < 1 || locks < 1 {
		return 0, 0, fmt.Errorf("%q is not SESSIONSxLOCKS (such as 10000x100) or 0", s)
	}
	return sessions, locks, nil
}

// splitList splits a comma-separated flag value, dropping blank items.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}
