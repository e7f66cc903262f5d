package suite

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/ticketd/ticketd/bench/failover"
	"github.com/ticketd/ticketd/bench/report"
	"github.com/ticketd/ticketd/bench/scale"
)

// scales runs the scale workload on every backend: a cluster of three
// ticketd processes filled to each of Config.Scale's steps and measured
// there (bench/scale).
func (r *runner) scales(ctx context.Context) error {
	binDir := filepath.Join(r.dir, "bin")
	bin, err := failover.BuildCommand(ctx, r.cfg.RepoRoot, binDir, "ticketd")
	var ctl string
	if err == nil {
		ctl, err = failover.BuildCommand(ctx, r.cfg.RepoRoot, binDir, "ticketctl")
	}
	if err != nil {
		r.progress.Skip(len(r.cfg.Backends))
		return r.failed(ctx, "scale: build ticketd and ticketctl", err)
	}
	for _, b := range r.cfg.Backends {
		what := fmt.Sprintf("scale · %s · %v locks", b, r.cfg.Scale.Steps)
		r.progress.Step(what)
		steps, err := scale.Run(ctx, scale.Config{
			Settings: *r.cfg.Scale, Binary: bin, Ctl: ctl, Backend: b,
			Dir:  filepath.Join(r.dir, "scale-"+b),
			Args: append(r.cfg.Timing.args(), r.cfg.FailoverArgs...),
			Logf: func(format string, args ...any) {
				r.progress.Note(fmt.Sprintf("scale · %s · ", b) + fmt.Sprintf(format, args...))
			},
		})
		r.rep.Scale = append(r.rep.Scale, steps...)
		if err != nil {
			if err := r.failed(ctx, what, err); err != nil {
				return err
			}
		}
	}
	return nil
}

// scaleSettings records the scale workload's settings in the report.
func scaleSettings(s *scale.Settings) *report.ScaleSettings {
	if s == nil {
		return nil
	}
	return &report.ScaleSettings{Steps: s.Steps, Clients: s.Clients, Kills: s.Kills, ProbeOps: s.ProbeOps,
		Sessions: s.Sessions, SessionLocks: s.SessionLocks, Renewals: s.Renewals}
}
