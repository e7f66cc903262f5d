package handoff

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/ticketd/ticketd/bench/latency"
	"github.com/ticketd/ticketd/bench/load"
)

// Cycle is one holder's turn on the contended key.
type Cycle struct {
	// Token is the fencing token of the grant (ticketd), or 0 when the system
	// gives none (etcd's Mutex): Match then orders by Acquired.
	Token uint64
	// Acquired is when the holder's Acquire returned to its client, Released
	// when its Release did.
	Acquired, Released time.Time
}

// Handoff is one step from a holder to the next, as Match pairs them.
type Handoff struct {
	// From and To are the two holders' cycles.
	From, To Cycle
}

// Latency is To's Acquire returning minus From's Release returning:
// negative when the next holder heard of its grant first.
func (h Handoff) Latency() time.Duration { return h.To.Acquired.Sub(h.From.Released) }

// Match puts cycles in holder order and pairs each holder with the next one.
// With tokens on both sides of a pair it pairs only consecutive tokens
// (t, t+1); with no token (0) on either side it pairs neighbours on the time
// line of Acquired. cycles is not modified. The result is in holder order.
func Match(cycles []Cycle) []Handoff {
	s := slices.Clone(cycles)
	slices.SortFunc(s, func(a, b Cycle) int {
		return cmp.Or(cmp.Compare(a.Token, b.Token), a.Acquired.Compare(b.Acquired))
	})
	var out []Handoff
	for i := 1; i < len(s); i++ {
		prev, next := s[i-1], s[i]
		if (prev.Token == 0) != (next.Token == 0) {
			continue
		}
		if prev.Token != 0 && next.Token != prev.Token+1 {
			continue
		}
		out = append(out, Handoff{From: prev, To: next})
	}
	return out
}

// Summarize returns the distribution of ds in microseconds, computed exactly
// from the sorted values (nearest rank), negative values kept: a
// latency.Histogram cannot hold them. Zero Summary for none.
func Summarize(ds []time.Duration) latency.Summary {
	if len(ds) == 0 {
		return latency.Summary{}
	}
	us := make([]float64, len(ds))
	var sum float64
	for i, d := range ds {
		us[i] = float64(d) / float64(time.Microsecond)
		sum += us[i]
	}
	slices.Sort(us)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(us)))) - 1
		return us[max(0, min(i, len(us)-1))]
	}
	return latency.Summary{
		Count: int64(len(us)), MeanUS: sum / float64(len(us)),
		P50US: rank(50), P90US: rank(90), P99US: rank(99), P999US: rank(99.9), MaxUS: us[len(us)-1],
	}
}

// InWindow returns the handoffs whose From Release returned in [from, to).
func InWindow(hs []Handoff, from, to time.Time) []Handoff {
	var out []Handoff
	for _, h := range hs {
		if !h.From.Released.Before(from) && h.From.Released.Before(to) {
			out = append(out, h)
		}
	}
	return out
}

// Recorder collects Cycles from many goroutines. The zero value is ready;
// Add and Cycles are safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	cycles []Cycle
}

// Add records c.
func (r *Recorder) Add(c Cycle) {
	r.mu.Lock()
	r.cycles = append(r.cycles, c)
	r.mu.Unlock()
}

// Cycles returns a copy of what was recorded.
func (r *Recorder) Cycles() []Cycle {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.cycles)
}

// CycleFunc runs one holder's turn for worker: Acquire (waiting) the one
// key, then Release it, returning the Cycle with both instants. An error
// counts as a failed operation (load.Op) and records nothing.
type CycleFunc func(ctx context.Context, worker int) (Cycle, error)

// Measure drives cycle from cfg.Concurrency workers with load.Run and
// returns its Result with the handoff figures in place of the cycle's own:
// Ops is the number of handoffs whose Release returned in the measured
// window, PerSec is Ops per second of the window, and Latency is the signed
// handoff latency distribution (Summarize); Errors and FirstError are
// load.Run's. Errors: those of load.Run.
func Measure(ctx context.Context, cfg load.Config, cycle CycleFunc) (load.Result, error) {
	var rec Recorder
	start := time.Now()
	res, err := load.Run(ctx, cfg, func(ctx context.Context, w int) error {
		c, err := cycle(ctx, w)
		if err != nil {
			return err
		}
		rec.Add(c)
		return nil
	})
	if res.WindowSec == 0 {
		return res, err
	}
	from := start.Add(cfg.Warmup)
	// The window load.Run measured: Duration, or longer with MinOps.
	to := from.Add(time.Duration(res.WindowSec * float64(time.Second)))
	return withHandoffs(res, InWindow(Match(rec.Cycles()), from, to)), err
}

// withHandoffs replaces res's figures by those of hs over res's window.
func withHandoffs(res load.Result, hs []Handoff) load.Result {
	ds := make([]time.Duration, len(hs))
	for i, h := range hs {
		ds[i] = h.Latency()
	}
	res.Ops = int64(len(hs))
	res.ElapsedSec = res.WindowSec
	res.PerSec = float64(res.Ops) / res.WindowSec
	res.Latency = Summarize(ds)
	return res
}
