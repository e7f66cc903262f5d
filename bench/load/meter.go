package load

import (
	"context"
	"errors"
	"time"

	"github.com/ticketd/ticketd/bench/cputime"
)

// errNoWindow: the run ended (ctx cancelled) before the window's CPU could
// be sampled at both edges.
var errNoWindow = errors.New("load: window not sampled")

// windowMeter samples a cputime.Meter at the edges of the measured window
// from a goroutine of its own, so that the workers are never delayed by it.
type windowMeter struct {
	cfg Config
	// done closes once the goroutine has set start, err and (closed loop,
	// unless the window was extended) end.
	done       chan struct{}
	start, end cputime.Sample
	ended      bool // end was sampled at the window's end
	err        error
}

// startMeter starts sampling cfg.CPU at w's edges; nil when cfg.CPU is nil.
// In closed loop the goroutine also samples the end (w.end) unless MinOps
// has extended the window past it; otherwise, and in open loop, stop does,
// once every operation has completed.
func startMeter(ctx context.Context, cfg Config, w *window) *windowMeter {
	if cfg.CPU == nil {
		return nil
	}
	m := &windowMeter{cfg: cfg, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		if !sleep(ctx, time.Until(w.measureStart)) {
			m.err = errNoWindow
			return
		}
		m.start, m.err = cfg.CPU.Sample()
		if m.err != nil || cfg.Mode == ModeOpen {
			return
		}
		if !sleep(ctx, time.Until(w.end)) {
			m.err = errNoWindow
			return
		}
		if w.extended() {
			return
		}
		m.end, m.err = cfg.CPU.Sample()
		m.ended = m.err == nil
	}()
	return m
}

// stop returns the window's Usage, called after every worker has returned.
func (m *windowMeter) stop() (*cputime.Usage, error) {
	if m == nil {
		return nil, nil
	}
	<-m.done
	if m.err != nil {
		return nil, m.err
	}
	if !m.ended {
		if m.end, m.err = m.cfg.CPU.Sample(); m.err != nil {
			return nil, m.err
		}
	}
	u := m.cfg.CPU.Between(m.start, m.end)
	return &u, nil
}
