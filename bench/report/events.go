package report

import (
	"slices"
)

// summarizeElections sums es per system, in report order.
func summarizeElections(es []Elections) []ElectionFigure {
	by := map[string]*ElectionFigure{}
	var systems []string
	for _, e := range es {
		f, ok := by[e.System]
		if !ok {
			f = &ElectionFigure{System: e.System}
			by[e.System] = f
			systems = append(systems, e.System)
		}
		f.Levels++
		f.Total += e.Count()
		if e.Concurrency == AimElectionsConcurrency {
			f.AtMax++
			f.AtMaxElections += e.Count()
		}
	}
	slices.SortFunc(systems, CompareSystems)
	var out []ElectionFigure
	for _, s := range systems {
		out = append(out, *by[s])
	}
	return out
}

// summarizeFailovers gives each backend's median, min and max over its kills
// with a figure, in report order.
func summarizeFailovers(fs []Failover) []FailoverFigure {
	by := map[string][]float64{}
	failed := map[string]int{}
	var systems []string
	for _, f := range fs {
		if _, ok := by[f.System]; !ok {
			systems = append(systems, f.System)
			by[f.System] = nil
		}
		if f.Err != "" {
			failed[f.System]++
			continue
		}
		by[f.System] = append(by[f.System], f.MS)
	}
	slices.SortFunc(systems, CompareSystems)
	var out []FailoverFigure
	for _, s := range systems {
		ms := by[s]
		ff := FailoverFigure{System: s, Kills: len(ms), Failed: failed[s]}
		if len(ms) > 0 {
			ff.MedianMS, ff.MinMS, ff.MaxMS = Median(ms), slices.Min(ms), slices.Max(ms)
		}
		out = append(out, ff)
	}
	return out
}
