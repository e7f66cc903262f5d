package check

import (
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ticketd/ticketd/faults/history"
)

// Operations converts the operations of a history that the model orders to
// porcupine operations (see modelled for what is left out and why).
func Operations(ops []history.Op) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for i := range ops {
		op := &ops[i]
		if !modelled(op) {
			continue
		}
		out = append(out, porcupine.Operation{
			ClientId: op.Client,
			Input:    op,
			Output:   op,
			Call:     op.Call,
			Return:   op.Return,
			Metadata: op.Tag,
		})
	}
	return out
}

// Linearizability is the outcome of checking a history against the model.
type Linearizability struct {
	// Result is porcupine.Ok, porcupine.Illegal, or porcupine.Unknown when the
	// check ran out of time (the history is then neither proven nor refuted).
	Result porcupine.CheckResult
	// Info holds the partial linearisations for the HTML visualisation.
	Info porcupine.LinearizationInfo
	// Ops is the number of operations checked.
	Ops int
	// Elapsed is how long the check took.
	Elapsed time.Duration

	model   porcupine.Model
	unknown []porcupine.Annotation
}

// Linearizable checks ops against NewModel(ops), for at most timeout (0
// means no limit). ops must not be modified while it runs or afterwards
// while the result is used.
func Linearizable(ops []history.Op, timeout time.Duration) Linearizability {
	pops := Operations(ops)
	model := NewModel(ops)
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, pops, timeout)
	l := Linearizability{Result: res, Info: info, Ops: len(pops), Elapsed: time.Since(start), model: model}
	for _, op := range ops {
		if op.Outcome == history.Unknown && (op.Kind == history.Acquire || op.Kind == history.Release) {
			l.unknown = append(l.unknown, porcupine.Annotation{
				ClientId: op.Client, Start: op.Call, End: op.Return,
				Description: fmt.Sprintf("%s %s (unknown)", op.Kind, op.Key), Details: op.String(),
				BackgroundColor: "#e8e8e8",
			})
		}
	}
	return l
}

// Visualize writes porcupine's HTML visualisation of l to path. Unknown
// Acquires and Releases, which are events of the model rather than ordered
// operations, are drawn as grey annotations on their client's row; notes
// (faults, phases) are drawn as given.
func (l Linearizability) Visualize(path string, notes []porcupine.Annotation) error {
	info := l.Info
	info.AddAnnotations(l.unknown)
	info.AddAnnotations(notes)
	if err := porcupine.VisualizePath(l.model, info, path); err != nil {
		return fmt.Errorf("check: visualize %s: %w", path, err)
	}
	return nil
}

// explain turns an Illegal result into one Violation per key that has no
// linearisation: the longest linearisation porcupine found for the key, the
// operation none of them could take next (the earliest-returning one left
// out), and the model's states just before it.
func (l Linearizability) explain(ops []history.Op) []Violation {
	counts := map[string]int{}
	for i := range ops {
		if modelled(&ops[i]) {
			counts[ops[i].Key]++
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the order of partitionByKey
	var out []Violation
	for p, part := range l.Info.PartialLinearizationsOperations() {
		if p >= len(keys) {
			break
		}
		var best []porcupine.Operation
		for _, seq := range part {
			if len(seq) > len(best) {
				best = seq
			}
		}
		key := keys[p]
		if len(best) >= counts[key] {
			continue
		}
		in := map[int]bool{}
		state := l.model.Init()
		for _, pop := range best {
			op := pop.Input.(*history.Op)
			in[op.ID] = true
			_, state = l.model.Step(state, op, op)
		}
		var next *history.Op
		for i := range ops {
			op := &ops[i]
			if op.Key == key && modelled(op) && !in[op.ID] && (next == nil || op.Return < next.Return) {
				next = op
			}
		}
		v := Violation{Property: PropLinearizable, Key: key}
		for _, pop := range best[max(0, len(best)-3):] {
			v.OpIDs = append(v.OpIDs, pop.Input.(*history.Op).ID)
		}
		if next != nil {
			v.OpIDs = append(v.OpIDs, next.ID)
			v.Detail = fmt.Sprintf("the longest linearisation takes %d of the key's %d operations; none can take #%d next (%s); the model's states then: %s",
				len(best), counts[key], next.ID, next, l.model.DescribeState(state))
		}
		out = append(out, v)
	}
	return out
}
