package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/ticketd/ticketd/bench/backendcluster"
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
	for round := 1; round <= r.cfg.Rounds; round++ {
		if err := r.floor(ctx, round); err != nil {
			return err
		}
		if r.cfg.Commit {
			for _, b := range rotate(r.cfg.Backends, round-1) {
				if err := r.commits(ctx, round, b); err != nil {
					return err
				}
			}
		}
		var lockSystems []string
		if r.cfg.Lock {
			lockSystems = append(lockSystems, r.cfg.Backends...)
		}
		if r.cfg.Peer {
			lockSystems = append(lockSystems, report.SystemEtcdMutex)
		}
		for _, s := range rotate(lockSystems, round-1) {
			var err error
			if s == report.SystemEtcdMutex {
				err = r.peer(ctx, round)
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
	}
	return nil
}

func (r *runner) label(round int, parts ...any) string {
	s := fmt.Sprintf("round %d/%d", round, r.cfg.Rounds)
	for _, p := range parts {
		s += fmt.Sprintf(" · %v", p)
	}
	return s
}

func (r *runner) loadConfig(n int) load.Config {
	return load.Config{Mode: r.cfg.Mode, Concurrency: n, Duration: r.cfg.Duration, Warmup: r.cfg.Warmup, Rate: r.cfg.Rate}
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

// commits measures the commit workload on a fresh cluster of backend, at
// every concurrency level.
func (r *runner) commits(ctx context.Context, round int, backend string) error {
	c, err := backendcluster.Start(ctx, backendcluster.Config{
		New: newBackend[backend],
		Dir: filepath.Join(r.dir, fmt.Sprintf("r%d-commit-%s", round, backend)),
	})
	if err != nil {
		r.progress.Skip(len(r.cfg.Concurrency))
		return r.failed(ctx, r.label(round, "commit", backend, "start cluster"), err)
	}
	defer r.closeCluster(c, r.label(round, "commit", backend, "close cluster"))
	return r.levels(ctx, round, report.WorkloadCommit, backend, func(n int, prefix string) load.Op {
		return workload.Commits(c.Leader, n, prefix)
	})
}

// locks measures the lock workload through ticketd's API on a fresh
// cluster of backend, at every concurrency level.
func (r *runner) locks(ctx context.Context, round int, backend string) error {
	c, err := startLockCluster(ctx, backend, filepath.Join(r.dir, fmt.Sprintf("r%d-lock-%s", round, backend)))
	if err != nil {
		r.progress.Skip(len(r.cfg.Concurrency))
		return r.failed(ctx, r.label(round, "lock", backend, "start ticketd cluster"), err)
	}
	defer r.closeCluster(c, r.label(round, "lock", backend, "close ticketd cluster"))
	return r.levels(ctx, round, report.WorkloadLock, backend, func(n int, prefix string) load.Op {
		return workload.Locks(c.Client(), n, prefix)
	})
}

// levels runs the op newOp makes at every concurrency level in increasing
// order, one progress step each, and adds each Result as workload on
// system. newOp gets the level and a key prefix unique to the round and
// level. A failed level is noted and ends the series (its remaining steps
// are skipped); only a cancelled ctx returns an error.
func (r *runner) levels(ctx context.Context, round int, workload, system string, newOp func(n int, prefix string) load.Op) error {
	levels := r.cfg.Concurrency
	for i, n := range levels {
		what := r.label(round, workload, report.Label(workload, system), report.Clients(n))
		r.progress.Step(what)
		res, err := load.Run(ctx, r.loadConfig(n), newOp(n, fmt.Sprintf("r%dc%d", round, n)))
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
	levels := r.cfg.Concurrency
	system := report.PeerSystem(workload)
	if r.peerBin == "" {
		r.progress.Skip(len(levels))
		return nil
	}
	stepped := 0
	out, err := peer.Run(ctx, r.peerBin, peer.Config{
		Concurrency: levels, Duration: r.cfg.Duration, Warmup: r.cfg.Warmup,
		Mode: r.cfg.Mode, Rate: r.cfg.Rate, DataDir: r.dir, Workload: peerWorkload,
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
	for _, res := range out.Results {
		r.add(round, workload, system, res)
	}
	return nil
}

func (r *runner) add(round int, workload, system string, res load.Result) {
	r.rep.Measurements = append(r.rep.Measurements, report.Measurement{Round: round, Workload: workload, System: system, Result: res})
}
