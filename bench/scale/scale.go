package scale

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/ticketd/ticketd/bench/failover"
	"github.com/ticketd/ticketd/bench/report"
)

// ErrInvalidConfig: a Config field is missing or out of range.
var ErrInvalidConfig = errors.New("scale: invalid config")

// Defaults of Config's zero fields.
const (
	// DefaultClients is how many SDK clients fill the table at once: enough
	// for group commit to batch many grants per entry, below the servers'
	// 250 concurrent streams per connection.
	DefaultClients = 128
	// DefaultKills is how many times the leader is killed per step.
	DefaultKills = 3
	// DefaultProbeOps is how many Acquires per step the latency comes from.
	DefaultProbeOps = 200
	// DefaultLease is the lease of every lock filled in: long enough that
	// nothing expires during a run.
	DefaultLease = 24 * time.Hour
)

// Settings are what a scale run measures, the same on every backend (the
// -scale-* flags of ticketbench).
type Settings struct {
	// Steps are the table sizes, in exclusive locks, increasing. Required.
	Steps []int
	// Clients is how many SDK clients fill the table (and renew) at
	// once; 0 means DefaultClients.
	Clients int
	// Kills is how many kill -9s of the leader, and how many graceful
	// transfers of leadership, each step measures; 0 means DefaultKills.
	Kills int
	// ProbeOps is how many Acquires of fresh keys the step's latency comes
	// from; 0 means DefaultProbeOps.
	ProbeOps int
	// Sessions sessions holding SessionLocks locks each are added after
	// the last step, as a step of their own measured like the others
	// (0: none).
	Sessions, SessionLocks int
	// Renewals renewals of held locks run after the last step's (the
	// sessions step's, when there is one) measurements, then the data dirs are measured again (0: none).
	Renewals int
	// Lease is every filled lock's (and session's) lease; 0 means
	// DefaultLease.
	Lease time.Duration
}

// Validate reports the first invalid field, wrapped in ErrInvalidConfig.
func (s Settings) Validate() error {
	switch {
	case len(s.Steps) == 0:
		return fmt.Errorf("%w: no steps", ErrInvalidConfig)
	case s.Steps[0] < 1 || !slices.IsSorted(s.Steps) || len(slices.Compact(slices.Clone(s.Steps))) != len(s.Steps):
		return fmt.Errorf("%w: steps %v must be positive and increasing", ErrInvalidConfig, s.Steps)
	case s.Clients < 0 || s.Kills < 0 || s.ProbeOps < 0 || s.Sessions < 0 || s.SessionLocks < 0 || s.Renewals < 0 || s.Lease < 0:
		return fmt.Errorf("%w: negative count or lease", ErrInvalidConfig)
	case (s.Sessions == 0) != (s.SessionLocks == 0):
		return fmt.Errorf("%w: sessions %d × %d locks: both or neither", ErrInvalidConfig, s.Sessions, s.SessionLocks)
	}
	return nil
}

// Config is one backend's scale measurement.
type Config struct {
	Settings
	// Binary is the ticketd binary, Ctl the ticketctl binary
	// (failover.BuildCommand), Backend ticketd's --backend. Required.
	Binary, Ctl, Backend string
	// Dir holds the nodes' data and logs, the snapshot file and the
	// restored data dir; created, and removed by Run. Required.
	Dir string
	// Args are extra `ticketd serve` flags for every node (Raft timing);
	// Run adds the lease bound and lock limit the fill needs.
	Args []string
	// SettleTimeout bounds each wait for the cluster to agree on a leader
	// and catch up, and for a restarted node to be ready; 0 means 5 min.
	// WriteTimeout bounds the first write after a kill; 0 means 60 s.
	SettleTimeout, WriteTimeout time.Duration
	// Logf, if set, receives a line per step and measurement.
	Logf func(format string, args ...any)
}

func (c Config) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
}

// Validate reports the first missing or invalid field, wrapped in
// ErrInvalidConfig.
func (c Config) Validate() error {
	if c.Binary == "" || c.Ctl == "" || c.Backend == "" || c.Dir == "" {
		return fmt.Errorf("%w: Config needs Binary, Ctl, Backend and Dir", ErrInvalidConfig)
	}
	return c.Settings.Validate()
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.Clients == 0 {
		c.Clients = DefaultClients
	}
	if c.Kills == 0 {
		c.Kills = DefaultKills
	}
	if c.ProbeOps == 0 {
		c.ProbeOps = DefaultProbeOps
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.SettleTimeout == 0 {
		c.SettleTimeout = 5 * time.Minute
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = time.Minute
	}
	return c
}

// serveArgs are the `ticketd serve` flags of the cluster: leases up to
// cfg.Lease and no cap on the table (limits.max_locks 0), then cfg.Args.
func (c Config) serveArgs() []string {
	return append([]string{
		fmt.Sprintf("--lease-max-ms=%d", c.Lease.Milliseconds()),
		"--limits-max-locks=0",
	}, c.Args...)
}

// Run starts the cluster, measures every step as the package doc says and
// stops the cluster. It returns one ScaleStep per step reached (the
// sessions step last); a
// measurement that failed is recorded in its step's Errors and the run goes
// on, but a fill or a cluster that does not settle ends the run with that
// error (the steps measured so far are returned). Errors: ErrInvalidConfig,
// start errors, failover.ErrNoLeader, ctx's error.
func Run(ctx context.Context, cfg Config) ([]report.ScaleStep, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c, err := failover.Start(failover.Config{Binary: cfg.Binary, Backend: cfg.Backend, Dir: cfg.Dir, Args: cfg.serveArgs()})
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(cfg.Dir)
	defer c.Close()
	s := &scaler{cfg: cfg, c: c}
	var out []report.ScaleStep
	for i, locks := range cfg.Steps {
		// The renewals close the run: on the last exclusive step only when
		// no sessions step follows it.
		final := i == len(cfg.Steps)-1 && cfg.Sessions == 0
		st, err := s.step(ctx, locks, false, final)
		if st.System != "" {
			out = append(out, st)
		}
		if err != nil {
			return out, err
		}
	}
	if cfg.Sessions > 0 {
		st, err := s.step(ctx, cfg.Steps[len(cfg.Steps)-1], true, true)
		if st.System != "" {
			out = append(out, st)
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// scaler is one run's state: the cluster and the tokens of the locks it
// filled in (index i: key lockKey(i)).
type scaler struct {
	cfg    Config
	c      *failover.Cluster
	tokens []uint64
}

// step fills the table and measures it. Without sessions it fills it to
// locks exclusive locks; with sessions (a step of its own after the last
// exclusive one, locks being that step's count) it adds cfg.Sessions
// sessions × cfg.SessionLocks locks, so the step's row holds both and says
// so (report.ScaleStep.Label). final runs the renewals after the
// measurements and measures the data dirs again. A measurement's failure
// goes to the step's Errors; a failed fill or settle is returned.
func (s *scaler) step(ctx context.Context, locks int, sessions, final bool) (report.ScaleStep, error) {
	st := report.ScaleStep{System: s.cfg.Backend, Locks: locks}
	if sessions {
		st.Sessions, st.SessionLocks = s.cfg.Sessions, s.cfg.Sessions*s.cfg.SessionLocks
	}
	label := st.Label()
	failed := func(what string, err error) {
		st.Errors = append(st.Errors, fmt.Sprintf("%s: %v", what, err))
		s.cfg.logf("%s at %s locks: %s failed: %v", s.cfg.Backend, label, what, err)
	}
	if _, err := s.settle(ctx); err != nil {
		return report.ScaleStep{}, err
	}
	if sessions {
		took, err := s.fillSessions(ctx)
		if err != nil {
			return report.ScaleStep{}, fmt.Errorf("fill %d sessions × %d locks: %w", s.cfg.Sessions, s.cfg.SessionLocks, err)
		}
		st.FillPerSec = float64(st.SessionLocks) / took.Seconds()
		st.SessionFillPerSec = st.FillPerSec
		s.cfg.logf("%s: %d sessions × %d locks in %v (%.0f locks/s): %s locks", s.cfg.Backend, s.cfg.Sessions, s.cfg.SessionLocks,
			took.Round(time.Millisecond), st.FillPerSec, label)
	} else {
		from := len(s.tokens)
		took, err := s.fill(ctx, from, locks)
		if err != nil {
			return report.ScaleStep{}, fmt.Errorf("fill to %d locks: %w", locks, err)
		}
		st.FillPerSec = float64(locks-from) / took.Seconds()
		s.cfg.logf("%s: filled %d → %d locks in %v (%.0f locks/s)", s.cfg.Backend, from, locks, took.Round(time.Millisecond), st.FillPerSec)
	}
	if _, err := s.settle(ctx); err != nil {
		return st, err
	}

	if lat, err := s.acquireLatency(ctx, st.TotalLocks()); err != nil {
		failed("acquire latency", err)
	} else {
		st.AcquireP50US, st.AcquireP99US, st.AcquireOps = lat.P50US, lat.P99US, int(lat.Count)
	}
	if err := s.snapshot(ctx, &st); err != nil {
		failed("snapshot save and restore", err)
	}
	st.DataDirBytes, st.RSSBytes = s.usage(failed)
	if d, err := s.restartFollower(ctx); err != nil {
		failed("follower restart", err)
	} else {
		st.RestartReadyMS = ms(d)
	}
	for k := 1; k <= s.cfg.Kills; k++ {
		r, err := s.transfer(ctx, fmt.Sprintf("scale/transfer/%d/%d", st.TotalLocks(), k))
		st.TransferWrites += r.Writes
		st.TransferRefused += r.Refused
		st.TransferRetried += r.Retried
		if err != nil {
			if ctx.Err() != nil {
				return st, ctx.Err()
			}
			failed(fmt.Sprintf("transfer-leader %d", k), err)
			continue
		}
		st.TransferMS = append(st.TransferMS, ms(r.Took))
	}
	for k := 1; k <= s.cfg.Kills; k++ {
		took, promo, promoted, err := s.failover(ctx, fmt.Sprintf("scale/failover/%d/%d", st.TotalLocks(), k))
		if err != nil {
			if ctx.Err() != nil {
				return st, ctx.Err()
			}
			failed(fmt.Sprintf("failover %d", k), err)
			continue
		}
		st.FailoverMS = append(st.FailoverMS, ms(took))
		if promoted {
			st.PromotionMS = append(st.PromotionMS, ms(promo))
		} else {
			failed(fmt.Sprintf("promotion %d", k), errors.New("no Raft leadership → promotion pair in the survivors' logs"))
		}
	}
	if final && s.cfg.Renewals > 0 {
		if err := s.renew(ctx, s.cfg.Renewals); err != nil {
			failed(fmt.Sprintf("%d renewals", s.cfg.Renewals), err)
		} else {
			st.Renewals = s.cfg.Renewals
			st.RenewedDataDirBytes, _ = s.usage(failed)
		}
	}
	return st, ctx.Err()
}

// settle waits for an agreed, caught-up leader (failover.Cluster.Settle)
// and returns its index.
func (s *scaler) settle(ctx context.Context) (int, error) {
	return s.c.Settle(ctx, s.cfg.SettleTimeout)
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
