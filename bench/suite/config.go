package suite

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/bench/load"
	"github.com/ticketd/ticketd/bench/loadproc"
	"github.com/ticketd/ticketd/bench/peer"
	"github.com/ticketd/ticketd/bench/scale"
)

// Sentinel errors of package suite.
var (
	// ErrInvalidConfig: a Config field is missing or out of range.
	ErrInvalidConfig = errors.New("suite: invalid config")
)

// Config is one benchmark run.
type Config struct {
	// Backends lists the ticketd backends to measure, by name (Backends()).
	Backends []string
	// LogStores lists the Raft log stores (backends.LogStores) the commit
	// and snapshots workloads run on, each on every backend of Backends
	// that offers it (rows "hashicorp", "hashicorp/badger", ...:
	// report.StoreSystem); the other workloads use each backend's default
	// store. Empty: the default store only.
	LogStores []string
	// Concurrency lists the client counts, each at least 1.
	Concurrency []int
	// Duration is each measurement's window; Warmup runs unrecorded before it.
	Duration, Warmup time.Duration
	// MinOps extends a closed-loop window until that many operations
	// started in it have succeeded (load.Config.MinOps).
	MinOps int
	// Rounds is how many times every measurement is repeated; at least 1.
	Rounds int
	// Mode and Rate pace the clients (load.Config); Rate only in open loop.
	Mode load.Mode
	Rate float64
	// Commit, Lock and Renew switch the commit, lock and renew workloads on;
	// Peer adds the etcd peer to the lock workload (etcd Mutex), to the
	// renew workload (etcd LeaseKeepAlive) and to the handoff workload (etcd
	// Mutex on one prefix).
	Commit, Lock, Renew, Peer bool
	// KeepAlive switches the keepalive workload on: sessions of
	// report.KeepAliveKeys locks each, kept alive by ticketd's KeepAlive;
	// with Peer, etcd leases of as many keys kept alive by LeaseKeepAlive.
	KeepAlive bool
	// Handoff switches the contended handoff workload on, run at
	// HandoffConcurrency (default 2, 8, 32) on every backend.
	Handoff            bool
	HandoffConcurrency []int
	// Shared switches the shared-locks benchmark on: on every
	// backend, Acquire-wait+Release cycles on one key shared, on one key
	// exclusive, on one key as a semaphore of limit 8, and on distinct keys
	// exclusive (workload.Holding), at SharedConcurrency (default 1, 16, 64).
	Shared            bool
	SharedConcurrency []int
	// Snapshots switches on the snapshots-on vs snapshots-off commit
	// measurement at report.AimSnapshotConcurrency clients.
	Snapshots bool
	// Failover switches on the failover measurement: FailoverKills kill -9s
	// of the leader of a three-process cluster per backend (default 5), with
	// ticketd built from RepoRoot (the repository root; default: found from
	// the working directory).
	Failover      bool
	FailoverKills int
	RepoRoot      string
	// FailoverArgs are extra `ticketd serve` flags for the failover cluster
	// (e.g. "--raft-election-timeout-ms=500"); FailoverBackoffMax, if not
	// zero, caps the SDK's retry backoff there (sdk.WithBackoff). Both are
	// for trying timing changes; the defaults measure what ships.
	FailoverArgs       []string
	FailoverBackoffMax time.Duration
	// Scale, when set, switches on the scale workload (bench/scale) with
	// these settings on every backend: a three-process cluster filled to
	// each step and measured there, with ticketd and ticketctl built from
	// RepoRoot and FailoverArgs added to its nodes' flags.
	Scale *scale.Settings
	// Timing overrides the Raft timing of every cluster of the run (commit,
	// API and failover clusters); zero fields keep the shipped defaults.
	Timing Timing
	// DataDir is where the run's temporary data directory is made (every
	// cluster's data and the fsync floor file); empty means os.TempDir().
	DataDir string
	// Progress receives the progress line (usually os.Stderr); nil for none.
	Progress io.Writer
	// PeerBuild says where the peer's sources and binary cache are.
	PeerBuild peer.BuildConfig
	// Clients says how ticketd's client processes are started; the zero
	// value runs this program's own executable, which must then call
	// ServeClients first thing in main.
	Clients loadproc.Config
}

// Validate reports the first invalid field, wrapped in ErrInvalidConfig.
func (c Config) Validate() error {
	known := Backends()
	for _, b := range c.Backends {
		if !slices.Contains(known, b) {
			return fmt.Errorf("%w: unknown backend %q (known: %v)", ErrInvalidConfig, b, known)
		}
	}
	for _, s := range c.LogStores {
		if !slices.Contains(backends.LogStores(), s) {
			return fmt.Errorf("%w: unknown log store %q (known: %v)", ErrInvalidConfig, s, backends.LogStores())
		}
	}
	for _, n := range slices.Concat(c.Concurrency, c.HandoffConcurrency, c.SharedConcurrency) {
		if n < 1 {
			return fmt.Errorf("%w: concurrency %d < 1", ErrInvalidConfig, n)
		}
	}
	lc := load.Config{Mode: c.Mode, Concurrency: 1, Duration: c.Duration, Warmup: c.Warmup, Rate: c.Rate, MinOps: c.MinOps}
	switch {
	case len(c.Concurrency) == 0:
		return fmt.Errorf("%w: no concurrency levels", ErrInvalidConfig)
	case c.Rounds < 1:
		return fmt.Errorf("%w: rounds %d < 1", ErrInvalidConfig, c.Rounds)
	case !c.Commit && !c.Lock && !c.Renew && !c.KeepAlive && !c.Peer && !c.Handoff && !c.Shared && !c.Snapshots && !c.Failover && c.Scale == nil:
		return fmt.Errorf("%w: nothing to measure", ErrInvalidConfig)
	case (c.Commit || c.Lock || c.Renew || c.KeepAlive || c.Handoff || c.Shared || c.Snapshots || c.Failover || c.Scale != nil) && len(c.Backends) == 0 && !c.Peer:
		return fmt.Errorf("%w: no backends", ErrInvalidConfig)
	}
	if c.Scale != nil {
		if err := c.Scale.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	if err := lc.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// steps is how many progress steps a run of c takes.
func (c Config) steps() int {
	perRound := 1 // floor
	levels := len(c.Concurrency)
	if c.Commit {
		perRound += len(c.commitTargets()) * levels
	}
	if c.Lock {
		perRound += len(c.Backends) * levels
	}
	if c.Renew {
		perRound += len(c.Backends) * levels
	}
	if c.Peer && c.Lock {
		perRound += levels
	}
	if c.Peer && c.Renew {
		perRound += levels
	}
	if c.KeepAlive {
		perRound += (len(c.Backends) + btoi(c.Peer)) * levels
	}
	if c.Handoff {
		perRound += (len(c.Backends) + btoi(c.Peer)) * len(c.handoffLevels())
	}
	if c.Shared {
		perRound += len(c.Backends) * len(holdings) * len(c.sharedLevels())
	}
	if c.Snapshots {
		perRound += 2 * len(c.commitTargets())
	}
	steps := c.Rounds * perRound
	if c.Failover {
		steps += len(c.Backends)
	}
	if c.Scale != nil {
		steps += len(c.Backends)
	}
	return steps
}

// rotate returns xs rotated left by k: the order of round k+1.
func rotate[T any](xs []T, k int) []T {
	if len(xs) == 0 {
		return nil
	}
	k %= len(xs)
	return append(append([]T(nil), xs[k:]...), xs[:k]...)
}

// handoffLevels is HandoffConcurrency or its default, 2, 8 and 32 clients.
func (c Config) handoffLevels() []int {
	if len(c.HandoffConcurrency) > 0 {
		return c.HandoffConcurrency
	}
	return []int{2, 8, 32}
}

// sharedLevels is SharedConcurrency or its default, 1, 16 and 64 clients.
func (c Config) sharedLevels() []int {
	if len(c.SharedConcurrency) > 0 {
		return c.SharedConcurrency
	}
	return []int{1, 16, 64}
}

// btoi is 1 for true.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Timing is a Raft timing to try instead of the shipped defaults (the aim:
// failover within a second without leader changes under load).
type Timing struct {
	// ElectionTimeout is backends.Config.ElectionTimeout (ticketd's
	// raft.election_timeout_ms); HeartbeatInterval its HeartbeatInterval
	// (raft.heartbeat_ms). Zero means the default.
	ElectionTimeout, HeartbeatInterval time.Duration
}

// args are the `ticketd serve` flags of t.
func (t Timing) args() []string {
	var out []string
	if t.ElectionTimeout > 0 {
		out = append(out, fmt.Sprintf("--raft-election-timeout-ms=%d", t.ElectionTimeout.Milliseconds()))
	}
	if t.HeartbeatInterval > 0 {
		out = append(out, fmt.Sprintf("--raft-heartbeat-ms=%d", t.HeartbeatInterval.Milliseconds()))
	}
	return out
}

// tune applies t to a backend node's config.
func (t Timing) tune(cfg *backends.Config) {
	if t.ElectionTimeout > 0 {
		cfg.ElectionTimeout = t.ElectionTimeout
	}
	if t.HeartbeatInterval > 0 {
		cfg.HeartbeatInterval = t.HeartbeatInterval
	}
}
