package suite

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/ticketd/ticketd/bench/load"
	"github.com/ticketd/ticketd/bench/peer"
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
	// Concurrency lists the client counts, each at least 1.
	Concurrency []int
	// Duration is each measurement's window; Warmup runs unrecorded before it.
	Duration, Warmup time.Duration
	// Rounds is how many times every measurement is repeated; at least 1.
	Rounds int
	// Mode and Rate pace the clients (load.Config); Rate only in open loop.
	Mode load.Mode
	Rate float64
	// Commit, Lock and Renew switch the commit, lock and renew workloads on;
	// Peer adds the etcd peer to the lock workload (etcd Mutex) and to the
	// renew workload (etcd LeaseKeepAlive).
	Commit, Lock, Renew, Peer bool
	// DataDir is where the run's temporary data directory is made (every
	// cluster's data and the fsync floor file); empty means os.TempDir().
	DataDir string
	// Progress receives the progress line (usually os.Stderr); nil for none.
	Progress io.Writer
	// PeerBuild says where the peer's sources and binary cache are.
	PeerBuild peer.BuildConfig
}

// Validate reports the first invalid field, wrapped in ErrInvalidConfig.
func (c Config) Validate() error {
	known := Backends()
	for _, b := range c.Backends {
		if !slices.Contains(known, b) {
			return fmt.Errorf("%w: unknown backend %q (known: %v)", ErrInvalidConfig, b, known)
		}
	}
	for _, n := range c.Concurrency {
		if n < 1 {
			return fmt.Errorf("%w: concurrency %d < 1", ErrInvalidConfig, n)
		}
	}
	lc := load.Config{Mode: c.Mode, Concurrency: 1, Duration: c.Duration, Warmup: c.Warmup, Rate: c.Rate}
	switch {
	case len(c.Concurrency) == 0:
		return fmt.Errorf("%w: no concurrency levels", ErrInvalidConfig)
	case c.Rounds < 1:
		return fmt.Errorf("%w: rounds %d < 1", ErrInvalidConfig, c.Rounds)
	case !c.Commit && !c.Lock && !c.Renew && !c.Peer:
		return fmt.Errorf("%w: nothing to measure", ErrInvalidConfig)
	case (c.Commit || c.Lock || c.Renew) && len(c.Backends) == 0 && !c.Peer:
		return fmt.Errorf("%w: no backends", ErrInvalidConfig)
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
		perRound += len(c.Backends) * levels
	}
	if c.Lock {
		perRound += len(c.Backends) * levels
	}
	if c.Renew {
		perRound += len(c.Backends) * levels
	}
	if c.Peer {
		perRound += levels
	}
	if c.Peer && c.Renew {
		perRound += levels
	}
	return c.Rounds * perRound
}

// rotate returns xs rotated left by k: the order of round k+1.
func rotate[T any](xs []T, k int) []T {
	if len(xs) == 0 {
		return nil
	}
	k %= len(xs)
	return append(append([]T(nil), xs[k:]...), xs[:k]...)
}
