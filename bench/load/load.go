package load

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ticketd/ticketd/bench/cputime"
	"github.com/ticketd/ticketd/bench/latency"
)

// Sentinel errors of package load.
var (
	// ErrInvalidConfig: a Config field is missing or out of range.
	ErrInvalidConfig = errors.New("load: invalid config")
)

// Mode says how operations are paced.
type Mode string

const (
	// ModeClosed: each worker issues its next operation when the last returns.
	ModeClosed Mode = "closed"
	// ModeOpen: operations are issued at a fixed rate; latency counts from the
	// intended send time (no coordinated omission).
	ModeOpen Mode = "open"
)

// errorBackoff is how long a closed-loop worker waits after a failed operation,
// so that an operation failing at once (no leader during an election) does not
// spin a core that the cluster under test needs.
const errorBackoff = 5 * time.Millisecond

// defaultOpTimeout bounds one operation when Config.OpTimeout is zero.
const defaultOpTimeout = 10 * time.Second

// Config describes one measurement.
type Config struct {
	// Mode is ModeClosed (the default when empty) or ModeOpen.
	Mode Mode
	// Concurrency is the number of workers: closed-loop clients, or the most
	// operations in flight at once in open loop. At least 1.
	Concurrency int
	// Duration is the measured window. Must be positive.
	Duration time.Duration
	// Warmup runs the workload before the window without recording it.
	Warmup time.Duration
	// Rate is the open-loop schedule in operations per second over all
	// workers. Required (positive) in ModeOpen, ignored in ModeClosed.
	Rate float64
	// OpTimeout bounds each operation through its ctx; 0 means 10 s.
	OpTimeout time.Duration
	// CPU, if set, is sampled when the measured window starts and when it
	// ends (closed loop: at the window's end; open loop: once every
	// recorded operation has completed, as ElapsedSec), and Result.CPU is
	// what its processes used in between.
	CPU *cputime.Meter
	// MinOps, in closed loop, is the least number of successful operations
	// a window measures: when fewer of the operations started in it have
	// succeeded by the end of Duration (a starved machine, where one
	// operation can outlast the whole window, or an election that failed
	// them), the window goes on until MinOps have, but no longer than
	// OpTimeout past Duration; Result.WindowSec says how long it was. Like
	// go test's -benchtime, which runs a benchmark at least once. 0: the
	// window is Duration, whatever it measured. Ignored in open loop, whose
	// schedule fixes the operations.
	MinOps int
}

// Validate reports the first invalid field, wrapped in ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case c.Mode != "" && c.Mode != ModeClosed && c.Mode != ModeOpen:
		return fmt.Errorf("%w: unknown mode %q", ErrInvalidConfig, c.Mode)
	case c.Concurrency < 1:
		return fmt.Errorf("%w: concurrency %d < 1", ErrInvalidConfig, c.Concurrency)
	case c.Duration <= 0:
		return fmt.Errorf("%w: duration %v not positive", ErrInvalidConfig, c.Duration)
	case c.Warmup < 0:
		return fmt.Errorf("%w: negative warmup %v", ErrInvalidConfig, c.Warmup)
	case c.Mode == ModeOpen && !(c.Rate > 0):
		return fmt.Errorf("%w: open loop needs a positive rate, got %v", ErrInvalidConfig, c.Rate)
	case c.MinOps < 0:
		return fmt.Errorf("%w: negative min ops %d", ErrInvalidConfig, c.MinOps)
	}
	return nil
}

// Op performs one operation for worker, 0 ≤ worker < Concurrency. Calls for the
// same worker never overlap. ctx carries Config.OpTimeout. A non-nil error
// counts the operation as failed; its latency is not recorded.
type Op func(ctx context.Context, worker int) error

// Result is what one measurement saw. JSON names are those of the report file.
type Result struct {
	// Mode, Concurrency and RatePerSec (open loop only) repeat the Config.
	Mode        Mode    `json:"mode"`
	Concurrency int     `json:"concurrency"`
	RatePerSec  float64 `json:"rate_per_sec,omitempty"`
	// Ops is the number of successful operations started in the window; the
	// latency figures come from exactly these.
	Ops int64 `json:"ops"`
	// Errors is the number of failed operations started in the window, and
	// FirstError the text of the first one.
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// WindowSec is the measured window in seconds: Duration, or longer in
	// closed loop when Config.MinOps extended it.
	WindowSec float64 `json:"window_sec"`
	// ElapsedSec is the time the recorded operations took to complete, in
	// seconds: WindowSec in closed loop; in open loop, from the window's start
	// to the last recorded completion, at least WindowSec (a system that falls
	// behind the schedule drains its backlog after the window).
	ElapsedSec float64 `json:"elapsed_sec"`
	// PerSec is the achieved throughput, Ops divided by ElapsedSec.
	PerSec float64 `json:"per_sec"`
	// Latency is the distribution of the successful operations' latencies.
	Latency latency.Summary `json:"latency"`
	// CPU is what Config.CPU's server and client processes used over the
	// window; nil when not asked for or when a process could not be read
	// (CPUError says why).
	CPU      *cputime.Usage `json:"cpu,omitempty"`
	CPUError string         `json:"cpu_error,omitempty"`
}

// Run drives op as cfg says and returns what it measured. It calls op from
// cfg.Concurrency goroutines at once (never two calls for one worker at a
// time) and returns once the window has passed and every started operation
// has returned. Errors: ErrInvalidConfig (wrapped, see Validate) before
// anything runs; ctx.Err() when a cancelled ctx stopped the workers early,
// with the partial Result. Failed operations are not errors of Run: they are
// counted in Result.Errors.
func Run(ctx context.Context, cfg Config, op Op) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if cfg.Mode == "" {
		cfg.Mode = ModeClosed
	}
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = defaultOpTimeout
	}
	w := &window{start: time.Now(), minOps: int64(cfg.MinOps)}
	w.measureStart = w.start.Add(cfg.Warmup)
	w.end = w.measureStart.Add(cfg.Duration)
	if cfg.Mode == ModeOpen {
		w.minOps = 0
	}
	w.latest = w.end.Add(cfg.OpTimeout)

	workers := make([]worker, cfg.Concurrency)
	var errs errorCount
	meter := startMeter(ctx, cfg, w)
	var wg sync.WaitGroup
	var next atomic.Int64 // open loop: index of the next scheduled operation
	for i := range workers {
		workers[i].hist = latency.New()
		wg.Go(func() {
			wk := &workers[i]
			if cfg.Mode == ModeOpen {
				wk.runOpen(ctx, cfg, w, i, &next, op, &errs)
			} else {
				wk.runClosed(ctx, cfg, w, i, op, &errs)
			}
		})
	}
	wg.Wait()
	cpu, cpuErr := meter.stop()

	total := latency.New()
	measured := w.measured()
	elapsed := measured
	for i := range workers {
		total.Merge(workers[i].hist)
		if cfg.Mode == ModeOpen && workers[i].lastDone.Sub(w.measureStart) > elapsed {
			elapsed = workers[i].lastDone.Sub(w.measureStart)
		}
	}
	res := Result{
		Mode:        cfg.Mode,
		Concurrency: cfg.Concurrency,
		Ops:         total.Count(),
		Errors:      errs.n.Load(),
		FirstError:  errs.firstText(),
		WindowSec:   measured.Seconds(),
		ElapsedSec:  elapsed.Seconds(),
		Latency:     total.Summarize(),
	}
	if cfg.Mode == ModeOpen {
		res.RatePerSec = cfg.Rate
	}
	res.PerSec = float64(res.Ops) / res.ElapsedSec
	res.CPU = cpu
	if cpuErr != nil {
		res.CPUError = cpuErr.Error()
	}
	return res, ctx.Err()
}

// window holds the measurement's instants: fixed ones, and, when minOps
// is set, the count of successful operations started in it and when it
// reached minOps.
type window struct {
	start, measureStart, end time.Time
	// latest is as far as minOps may extend the window (end + OpTimeout).
	latest time.Time
	minOps int64
	ok     atomic.Int64 // successful operations started in the window
	// reachedNS is the time (UnixNano) ok reached minOps; 0 until then.
	reachedNS atomic.Int64
}

// succeeded counts a successful operation started in the window.
func (w *window) succeeded(now time.Time) {
	if w.ok.Add(1) == w.minOps {
		w.reachedNS.Store(now.UnixNano())
	}
}

// open reports whether an operation starting at t0 belongs to the window:
// before end, or, while fewer than minOps have succeeded, before latest.
func (w *window) open(t0 time.Time) bool {
	if t0.Before(w.end) {
		return true
	}
	return w.minOps > 0 && w.reachedNS.Load() == 0 && t0.Before(w.latest)
}

// extended reports whether, at its end, the window goes on because fewer
// than minOps operations have succeeded.
func (w *window) extended() bool {
	return w.minOps > 0 && w.reachedNS.Load() == 0
}

// measured is how long the window lasted, once every worker has returned:
// Duration, or until minOps succeeded (latest if they never did).
func (w *window) measured() time.Duration {
	end := w.end
	if w.minOps > 0 {
		if r := w.reachedNS.Load(); r == 0 {
			end = w.latest
		} else if t := time.Unix(0, r); t.After(end) {
			end = t
		}
	}
	return end.Sub(w.measureStart)
}

// worker is one goroutine's private state.
type worker struct {
	hist     *latency.Histogram
	lastDone time.Time // completion of the last recorded operation
}

// errorCount counts failures from many goroutines and keeps the first one.
type errorCount struct {
	n     atomic.Int64
	once  sync.Once
	first error
}

func (e *errorCount) add(err error) {
	e.n.Add(1)
	e.once.Do(func() { e.first = err })
}

// firstText is called after every worker has returned.
func (e *errorCount) firstText() string {
	if e.first == nil {
		return ""
	}
	return e.first.Error()
}

func (wk *worker) runClosed(ctx context.Context, cfg Config, w *window, id int, op Op, errs *errorCount) {
	for ctx.Err() == nil {
		t0 := time.Now()
		if !w.open(t0) {
			return
		}
		err := call(ctx, cfg.OpTimeout, id, op)
		done := time.Now()
		if err != nil {
			if !t0.Before(w.measureStart) {
				errs.add(err)
			}
			sleep(ctx, errorBackoff)
			continue
		}
		if !t0.Before(w.measureStart) {
			wk.hist.Record(done.Sub(t0))
			w.succeeded(done)
		}
	}
}

func (wk *worker) runOpen(ctx context.Context, cfg Config, w *window, id int, next *atomic.Int64, op Op, errs *errorCount) {
	nsPerOp := float64(time.Second) / cfg.Rate
	for ctx.Err() == nil {
		i := next.Add(1) - 1
		intended := w.start.Add(time.Duration(float64(i) * nsPerOp))
		if !intended.Before(w.end) {
			return
		}
		if !sleep(ctx, time.Until(intended)) {
			return
		}
		err := call(ctx, cfg.OpTimeout, id, op)
		done := time.Now()
		if intended.Before(w.measureStart) {
			continue
		}
		if err != nil {
			errs.add(err)
			continue
		}
		wk.hist.Record(done.Sub(intended))
		wk.lastDone = done
	}
}

func call(ctx context.Context, timeout time.Duration, id int, op Op) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return op(ctx, id)
}

// sleep waits d or until ctx is done; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
