package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/bench/backendcluster"
	"github.com/ticketd/ticketd/bench/cputime"
	"github.com/ticketd/ticketd/bench/floor"
	"github.com/ticketd/ticketd/bench/load"
	"github.com/ticketd/ticketd/bench/peer"
	"github.com/ticketd/ticketd/bench/progress"
	"github.com/ticketd/ticketd/bench/report"
	"github.com/ticketd/ticketd/bench/workload"
)

// Run measures everything cfg asks for and returns the summarized report. It
// returns an error only for an invalid cfg, a data directory it cannot make,
// or a cancelled ctx (then with the partial report); failures of single parts
// become Report.Notes.
func Run(ctx context.Context, cfg Config) (*report.Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Mode == "" {
		cfg.Mode = load.ModeClosed
	}
	base := cfg.DataDir
	if base == "" {
		base = os.TempDir()
	}
	tmp, err := os.MkdirTemp(base, "ticketbench-")
	if err != nil {
		return nil, fmt.Errorf("suite: data dir: %w", err)
	}
	defer os.RemoveAll(tmp)

	var out io.Writer = io.Discard
	if cfg.Progress != nil {
		out = cfg.Progress
	}
	r := &runner{cfg: cfg, dir: tmp, progress: progress.New(out, cfg.steps())}
	r.rep = &report.Report{
		Started: time.Now(),
		Machine: machine(tmp),
		Settings: report.Settings{
			DurationSec: cfg.Duration.Seconds(), WarmupSec: cfg.Warmup.Seconds(),
			Concurrency: cfg.Concurrency, Backends: cfg.Backends, Rounds: cfg.Rounds,
			Mode: cfg.Mode, RatePerSec: cfg.Rate, Peer: cfg.Peer,
			ElectionTimeoutMS: cfg.Timing.ElectionTimeout.Milliseconds(), HeartbeatMS: cfg.Timing.HeartbeatInterval.Milliseconds(),
			FailoverBackoffMaxMS: cfg.FailoverBackoffMax.Milliseconds(), FailoverArgs: cfg.FailoverArgs,
			Scale: scaleSettings(cfg.Scale),
		},
	}
	r.rep.Machine.DataDir = base
	if cfg.Peer {
		r.buildPeer(ctx)
	}
	err = r.rounds(ctx)
	r.progress.Done()
	r.rep.Finished = time.Now()
	r.rep.Machine.LoadAvgEnd = loadAvg()
	r.rep.Summarize()
	return r.rep, err
}

// runner is one run's state.
type runner struct {
	cfg      Config
	dir      string
	progress *progress.Line
	rep      *report.Report
	peerBin  string // "" when the peer is off or failed to build
	// cpuDone is set once the rounds' CPU shares are recorded; peerCPU sums
	// the peer processes' CPU time.
	cpuDone bool
	peerCPU time.Duration
	// watch, when set, is the ticketd cluster whose elections levels counts.
	watch lockCluster
}

// term reads c's Raft term; 0 when it cannot be read (then no elections are
// recorded for the level, see elections).
func (r *runner) term(ctx context.Context, c lockCluster) uint64 {
	t, err := c.Term(ctx)
	if err != nil {
		return 0
	}
	return t
}

// elections records the elections on c during one level that began at term
// before (unknown when before is 0).
func (r *runner) elections(ctx context.Context, c lockCluster, round int, workload, system string, n int, before uint64) {
	after := r.term(ctx, c)
	if before == 0 || after == 0 {
		r.note("%s: elections not counted (Status failed)", r.label(round, workload, system, report.Clients(n)))
		return
	}
	r.rep.Elections = append(r.rep.Elections, report.Elections{
		Round: round, Workload: workload, System: system, Concurrency: n, TermBefore: before, TermAfter: after,
	})
}

func (r *runner) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.rep.Notes = append(r.rep.Notes, msg)
	r.progress.Note("note: " + msg)
}

func (r *runner) buildPeer(ctx context.Context) {
	r.progress.Note("building the etcd peer (bench/etcdpeer; the first build takes a minute or two)")
	bin, err := peer.Build(ctx, r.cfg.PeerBuild)
	if err != nil {
		r.note("etcd peer skipped: %v", err)
		return
	}
	r.peerBin = bin
}

func (r *runner) rounds(ctx context.Context) error {
	startWall, startCPU, startChildren, startMachine := time.Now(), cputime.Self(), cputime.Children(), cputime.Machine()
	shares := func() {
		r.cpuShares(time.Since(startWall), cputime.Self()-startCPU, cputime.Children()-startChildren, cputime.Machine()-startMachine)
	}
	defer shares()
	for round := 1; round <= r.cfg.Rounds; round++ {
		if err := r.floor(ctx, round); err != nil {
			return err
		}
		if r.cfg.Commit {
			for _, t := range rotate(r.cfg.commitTargets(), round-1) {
				if err := r.commits(ctx, round, t); err != nil {
					return err
				}
			}
		}
		var lockSystems []string
		if r.cfg.Lock || r.cfg.Handoff || r.cfg.Shared {
			lockSystems = append(lockSystems, r.cfg.Backends...)
		}
		if r.cfg.Peer {
			lockSystems = append(lockSystems, report.SystemEtcdMutex)
		}
		for _, s := range rotate(lockSystems, round-1) {
			var err error
			if s == report.SystemEtcdMutex {
				if r.cfg.Lock {
					err = r.peer(ctx, round)
				}
				if err == nil && r.cfg.Handoff {
					err = r.peerHandoffs(ctx, round)
				}
			} else {
				err = r.locks(ctx, round, s)
			}
			if err != nil {
				return err
			}
		}
		if r.cfg.Renew {
			if err := r.renewRound(ctx, round); err != nil {
				return err
			}
		}
		if r.cfg.KeepAlive {
			if err := r.keepAliveRound(ctx, round); err != nil {
				return err
			}
		}
		if r.cfg.Snapshots {
			for _, t := range rotate(r.cfg.commitTargets(), round-1) {
				if err := r.snapshots(ctx, round, t); err != nil {
					return err
				}
			}
		}
	}
	shares()
	if r.cfg.Failover {
		if err := r.failovers(ctx); err != nil {
			return err
		}
	}
	if r.cfg.Scale != nil {
		return r.scales(ctx)
	}
	return nil
}

// cpuShares records, once, the CPU this process (ticketd's in-process nodes,
// the commit workload's proposers), ticketd's client processes (children,
// the exited child processes, less the etcd peer's, which include the
// peer's clients) and the etcd peer processes used over the rounds (wall),
// and what the whole machine used (other work included).
func (r *runner) cpuShares(wall, self, children, machine time.Duration) {
	if r.cpuDone {
		return
	}
	r.cpuDone = true
	part := "rounds"
	r.rep.CPU = append(r.rep.CPU, report.CPUShare{Part: part, Process: "ticketbench (in-process ticketd nodes and the commit workload's proposers; includes the floor)", CPUSec: self.Seconds(), WallSec: wall.Seconds(), Share: cputime.Share(self, wall)})
	if clients := children - r.peerCPU; clients > 0 {
		r.rep.CPU = append(r.rep.CPU, report.CPUShare{Part: part, Process: "ticketd's client processes (one per API level)", CPUSec: clients.Seconds(), WallSec: wall.Seconds(), Share: cputime.Share(clients, wall)})
	}
	if r.peerCPU > 0 {
		r.rep.CPU = append(r.rep.CPU, report.CPUShare{Part: part, Process: "etcd peer (3 embedded members, and its client processes)", CPUSec: r.peerCPU.Seconds(), WallSec: wall.Seconds(), Share: cputime.Share(r.peerCPU, wall)})
	}
	if machine > 0 {
		r.rep.CPU = append(r.rep.CPU, report.CPUShare{Part: part, Process: "whole machine (/proc/stat: every process, other users' work included)", CPUSec: machine.Seconds(), WallSec: wall.Seconds(), Share: cputime.Share(machine, wall)})
	}
}

func (r *runner) label(round int, parts ...any) string {
	s := fmt.Sprintf("round %d/%d", round, r.cfg.Rounds)
	for _, p := range parts {
		s += fmt.Sprintf(" · %v", p)
	}
	return s
}

func (r *runner) loadConfig(n int) load.Config {
	return load.Config{Mode: r.cfg.Mode, Concurrency: n, Duration: r.cfg.Duration, Warmup: r.cfg.Warmup, Rate: r.cfg.Rate, MinOps: r.cfg.MinOps}
}

// inProcess is loadConfig for a workload whose clients run in this process
// beside the nodes (the commit workload: Propose is an in-process call): the
// window's CPU is metered on this process as the server side, clients
// included, and no client side.
func (r *runner) inProcess(n int) load.Config {
	cfg := r.loadConfig(n)
	cfg.CPU = &cputime.Meter{Servers: []int{0}}
	return cfg
}

// failed records a part's failure as a note and reports whether the run must
// stop (ctx cancelled).
func (r *runner) failed(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.note("%s: %v", what, err)
	return nil
}

func (r *runner) floor(ctx context.Context, round int) error {
	r.progress.Step(r.label(round, "physical floor (fsync, loopback RTT, badger)"))
	disk, err := floor.Fsync(ctx, r.dir, floor.Config{})
	if err != nil {
		return r.failed(ctx, r.label(round, "fsync floor"), err)
	}
	rtt, err := floor.RTT(ctx, floor.Config{})
	if err != nil {
		return r.failed(ctx, r.label(round, "RTT floor"), err)
	}
	fl := report.Floor{Round: round, Fsync: disk, RTT: rtt}
	if fl.Badger, err = floor.Badger(ctx, r.dir, floor.Config{}); err != nil {
		if err := r.failed(ctx, r.label(round, "badger floor"), err); err != nil {
			return err
		}
	}
	r.rep.Floors = append(r.rep.Floors, fl)
	return nil
}

// commits measures the commit workload on a fresh cluster of t's backend
// with t's log store, at every concurrency level, as system t.system().
func (r *runner) commits(ctx context.Context, round int, t commitTarget) error {
	system := t.system()
	c, err := backendcluster.Start(ctx, backendcluster.Config{
		New: newBackend[t.backend],
		Dir: filepath.Join(r.dir, fmt.Sprintf("r%d-commit-%s-%s", round, t.backend, t.store)),
		Tune: func(cfg *backends.Config) {
			r.cfg.Timing.tune(cfg)
			cfg.LogStore = t.store
		},
	})
	if err != nil {
		r.progress.Skip(len(r.cfg.Concurrency))
		return r.failed(ctx, r.label(round, "commit", system, "start cluster"), err)
	}
	defer r.closeCluster(c, r.label(round, "commit", system, "close cluster"))
	return r.levels(ctx, round, report.WorkloadCommit, system, func(n int, prefix string) (load.Result, error) {
		return load.Run(ctx, r.inProcess(n), workload.Commits(c.Leader, n, prefix))
	})
}

// locks measures the lock workload through ticketd's API on a fresh
// cluster of backend, at every concurrency level, counting the elections
// around each level; then, on the same cluster, the handoff workload and
// the shared-locks benchmark.
func (r *runner) locks(ctx context.Context, round int, backend string) error {
	c, err := startLockCluster(ctx, backend, filepath.Join(r.dir, fmt.Sprintf("r%d-lock-%s", round, backend)), r.cfg.Timing)
	if err != nil {
		if r.cfg.Lock {
			r.progress.Skip(len(r.cfg.Concurrency))
		}
		if r.cfg.Handoff {
			r.progress.Skip(len(r.cfg.handoffLevels()))
		}
		if r.cfg.Shared {
			r.progress.Skip(len(holdings) * len(r.cfg.sharedLevels()))
		}
		return r.failed(ctx, r.label(round, "lock", backend, "start ticketd cluster"), err)
	}
	defer r.closeCluster(c, r.label(round, "lock", backend, "close ticketd cluster"))
	if r.cfg.Lock {
		r.watch = c
		err = r.levels(ctx, round, report.WorkloadLock, backend, func(n int, prefix string) (load.Result, error) {
			return r.clients(ctx, c, report.WorkloadLock, n, prefix)
		})
		r.watch = nil
	}
	if err == nil && r.cfg.Handoff {
		err = r.handoffs(ctx, round, backend, c)
	}
	if err == nil && r.cfg.Shared {
		err = r.shared(ctx, round, backend, c)
	}
	return err
}

// levels runs measure at every concurrency level in increasing order, one
// progress step each, and adds each Result as workload on system. measure
// gets the level and a key prefix unique to the round and level. A failed
// level is noted and ends the series (its remaining steps are skipped);
// only a cancelled ctx returns an error.
func (r *runner) levels(ctx context.Context, round int, workload, system string, measure func(n int, prefix string) (load.Result, error)) error {
	levels := r.cfg.Concurrency
	for i, n := range levels {
		what := r.label(round, workload, report.Label(workload, system), report.Clients(n))
		r.progress.Step(what)
		var before uint64
		if r.watch != nil {
			before = r.term(ctx, r.watch)
		}
		res, err := measure(n, fmt.Sprintf("r%dc%d", round, n))
		if r.watch != nil {
			r.elections(ctx, r.watch, round, workload, system, n, before)
		}
		if err != nil {
			r.progress.Skip(len(levels) - i - 1)
			return r.failed(ctx, what, err)
		}
		r.add(round, workload, system, res)
	}
	return nil
}

// closeCluster closes c, recording a failure as a note under what.
func (r *runner) closeCluster(c io.Closer, what string) {
	if err := c.Close(); err != nil {
		r.note("%s: %v", what, err)
	}
}

func (r *runner) peer(ctx context.Context, round int) error {
	return r.peerWorkload(ctx, round, report.WorkloadLock, "lock")
}

// peerWorkload runs the etcd peer's workload (its -workload flag) at every
// concurrency level and adds the figures as workload.
func (r *runner) peerWorkload(ctx context.Context, round int, workload, peerWorkload string) error {
	return r.peerWorkloadAt(ctx, round, workload, peerWorkload, r.cfg.Concurrency)
}

// peerWorkloadAt is peerWorkload at the given levels.
func (r *runner) peerWorkloadAt(ctx context.Context, round int, workload, peerWorkload string, levels []int) error {
	return r.peerWorkloadKeys(ctx, round, workload, peerWorkload, levels, 0)
}

// peerWorkloadKeys is peerWorkloadAt with keys keys attached to each
// worker's lease (the peer's -keys flag).
func (r *runner) peerWorkloadKeys(ctx context.Context, round int, workload, peerWorkload string, levels []int, keys int) error {
	system := report.PeerSystem(workload)
	if r.peerBin == "" {
		r.progress.Skip(len(levels))
		return nil
	}
	stepped := 0
	out, err := peer.Run(ctx, r.peerBin, peer.Config{
		Concurrency: levels, Duration: r.cfg.Duration, Warmup: r.cfg.Warmup,
		Mode: r.cfg.Mode, Rate: r.cfg.Rate, DataDir: r.dir, Workload: peerWorkload, Keys: keys,
		OnLevel: func(n int) {
			stepped++
			r.progress.Step(r.label(round, workload, system, report.Clients(n)))
		},
	})
	if err != nil {
		r.progress.Skip(len(levels) - stepped)
		if errors.Is(err, context.Canceled) || ctx.Err() != nil {
			return ctx.Err()
		}
		return r.failed(ctx, r.label(round, workload, system), err)
	}
	r.peerCPU += out.CPU
	for _, res := range out.Results {
		r.add(round, workload, system, res)
	}
	return nil
}

func (r *runner) add(round int, workload, system string, res load.Result) {
	r.rep.Measurements = append(r.rep.Measurements, report.Measurement{Round: round, Workload: workload, System: system, Result: res})
}
