package check

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ticketd/ticketd/faults/history"
)

// Input is everything the checkers need from one run.
type Input struct {
	// Ops is the run's history (history.Recorder.History).
	Ops []history.Op
	// FinalLastToken is the largest last_token any node reported after the
	// final restart (0: not measured; Durability then skips the counter check).
	FinalLastToken uint64
	// Liveness describes the quiet end of the run (nil: Liveness is skipped).
	Liveness *LivenessWindow
	// Timeout bounds the linearizability check (0: no limit). When it runs out
	// the result is porcupine.Unknown, reported but not a violation.
	Timeout time.Duration
}

// Report is the result of every check of one run.
type Report struct {
	Linearizability Linearizability
	// Violations lists every broken property; empty when the run passed.
	Violations []Violation
}

// Run runs every checker on in: linearizability (porcupine, NewModel),
// Fencing, LeaseSafety, Durability and, when in.Liveness is set, Liveness.
func Run(in Input) Report {
	var r Report
	r.Linearizability = Linearizable(in.Ops, in.Timeout)
	if r.Linearizability.Result == porcupine.Illegal {
		vs := r.Linearizability.explain(in.Ops)
		if len(vs) == 0 {
			vs = []Violation{{Property: PropLinearizable,
				Detail: "no linearisation of the history matches the lock-table model (see linearizability.html)"}}
		}
		r.Violations = append(r.Violations, vs...)
	}
	r.Violations = append(r.Violations, Fencing(in.Ops)...)
	r.Violations = append(r.Violations, LeaseSafety(in.Ops)...)
	r.Violations = append(r.Violations, Durability(in.Ops, in.FinalLastToken)...)
	if in.Liveness != nil {
		r.Violations = append(r.Violations, Liveness(in.Ops, *in.Liveness)...)
	}
	return r
}

// Err returns nil when r has no violation, else a *ViolationsError.
func (r Report) Err() error {
	if len(r.Violations) == 0 {
		return nil
	}
	return &ViolationsError{Violations: r.Violations}
}

// Write stores r and the history it was made from in dir (created if
// missing): history.jsonl (history.Write), violations.txt, and
// linearizability.html (porcupine's visualisation, with notes drawn on it).
func (r Report) Write(dir string, ops []history.Op, notes []porcupine.Annotation) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("check: report dir: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return fmt.Errorf("check: history: %w", err)
	}
	if err := history.Write(f, ops); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("check: history: %w", err)
	}
	byID := make(map[int]history.Op, len(ops))
	for _, op := range ops {
		byID[op.ID] = op
	}
	var b strings.Builder
	fmt.Fprintf(&b, "linearizability: %s (%d ops, %v)\n", resultName(r.Linearizability.Result), r.Linearizability.Ops, r.Linearizability.Elapsed)
	for _, v := range r.Violations {
		b.WriteString(v.String())
		b.WriteString("\n")
		for _, id := range v.OpIDs {
			if op, ok := byID[id]; ok {
				fmt.Fprintf(&b, "    %s\n", op)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "violations.txt"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("check: violations: %w", err)
	}
	return r.Linearizability.Visualize(filepath.Join(dir, "linearizability.html"), notes)
}

// Verdict names the result of the linearizability check: "ok", "ILLEGAL",
// or "unknown (timed out)".
func (l Linearizability) Verdict() string { return resultName(l.Result) }

func resultName(r porcupine.CheckResult) string {
	switch r {
	case porcupine.Ok:
		return "ok"
	case porcupine.Illegal:
		return "ILLEGAL"
	}
	return "unknown (timed out)"
}
