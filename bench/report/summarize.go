package report

import (
	"cmp"
	"slices"
)

// Summarize derives r.Summary from r.Floors and r.Measurements, replacing any
// previous Summary. Measurements with no successful operation are left out of
// the medians (their errors are still counted in the Row).
func (r *Report) Summarize() {
	s := Summary{Floor: summarizeFloors(r.Floors), Rows: summarizeRows(r.Measurements)}
	s.Ratios = ratios(s.Rows, s.Floor)
	s.Elections = summarizeElections(r.Elections)
	s.Failover = summarizeFailovers(r.Failovers)
	s.Scale = summarizeScale(r.Scale)
	s.Aims = aims(s)
	r.Summary = s
}

// summarizeFloors takes the median of each floor figure over the rounds that
// measured both fsync and RTT (badger over the rounds that also measured it).
func summarizeFloors(floors []Floor) FloorFigure {
	var f FloorFigure
	var fs50, fs99, rt50, rt99, bg50, bg99 []float64
	for _, fl := range floors {
		if fl.Fsync.Count == 0 || fl.RTT.Count == 0 {
			continue
		}
		f.Rounds++
		f.FsyncSamples += fl.Fsync.Count
		f.RTTSamples += fl.RTT.Count
		fs50 = append(fs50, fl.Fsync.P50US)
		fs99 = append(fs99, fl.Fsync.P99US)
		rt50 = append(rt50, fl.RTT.P50US)
		rt99 = append(rt99, fl.RTT.P99US)
		if fl.Badger.Count > 0 {
			f.BadgerSamples += fl.Badger.Count
			bg50 = append(bg50, fl.Badger.P50US)
			bg99 = append(bg99, fl.Badger.P99US)
		}
	}
	if f.Rounds == 0 {
		return f
	}
	f.FsyncP50US, f.FsyncP99US = Median(fs50), Median(fs99)
	f.RTTP50US, f.RTTP99US = Median(rt50), Median(rt99)
	f.FloorUS = f.FsyncP50US + f.RTTP50US
	if len(bg50) > 0 {
		f.BadgerP50US, f.BadgerP99US = Median(bg50), Median(bg99)
		f.BadgerFloorUS = f.BadgerP50US + f.RTTP50US
	}
	return f
}

// rowKey identifies a Row.
type rowKey struct {
	workload, system string
	concurrency      int
}

// summarizeRows groups measurements into Rows, in report order.
func summarizeRows(ms []Measurement) []Row {
	groups := map[rowKey][]Measurement{}
	for _, m := range ms {
		k := rowKey{m.Workload, m.System, m.Concurrency}
		groups[k] = append(groups[k], m)
	}
	rows := make([]Row, 0, len(groups))
	for k, g := range groups {
		row := Row{Workload: k.workload, System: k.system, Concurrency: k.concurrency}
		var perSec, p50, p90, p99, p999, server, client []float64
		for _, m := range g {
			row.Errors += m.Errors
			if m.Ops == 0 {
				continue
			}
			if m.CPU != nil {
				server = append(server, m.CPU.ServerSec*1000/float64(m.Ops))
				if m.CPU.ClientProcs > 0 {
					client = append(client, m.CPU.ClientSec*1000/float64(m.Ops))
				}
			}
			row.Rounds++
			row.Ops += m.Ops
			perSec = append(perSec, m.PerSec)
			p50 = append(p50, m.Latency.P50US)
			p90 = append(p90, m.Latency.P90US)
			p99 = append(p99, m.Latency.P99US)
			p999 = append(p999, m.Latency.P999US)
		}
		row.PerSec, row.P50US, row.P90US = Median(perSec), Median(p50), Median(p90)
		row.P99US, row.P999US = Median(p99), Median(p999)
		row.ServerCPUPer1k, row.ClientCPUPer1k, row.CPURounds = Median(server), Median(client), len(server)
		rows = append(rows, row)
	}
	slices.SortFunc(rows, compareRows)
	return rows
}

// compareRows orders rows by workload (commit first), system (hashicorp,
// etcd, etcd-mutex, then others by name) and concurrency.
func compareRows(a, b Row) int {
	return cmp.Or(
		cmp.Compare(orderOf(workloadOrder, a.Workload), orderOf(workloadOrder, b.Workload)),
		cmp.Compare(a.Workload, b.Workload),
		CompareSystems(a.System, b.System),
		cmp.Compare(a.Concurrency, b.Concurrency),
	)
}

// Report order of workloads and of systems; others sort after these.
var (
	workloadOrder = []string{WorkloadCommit, WorkloadLock, WorkloadRenew, WorkloadKeepAlive, WorkloadHandoff, WorkloadSnapshotsOn, WorkloadSnapshotsOff,
		WorkloadSharedKey, WorkloadExclusiveKey, WorkloadSemaphoreKey, WorkloadDistinctKeys}
	systemOrder = []string{SystemHashicorp, SystemEtcd, SystemEtcdMutex, SystemEtcdKeepAlive}
)

// CompareSystems orders system names as the report does: hashicorp, etcd,
// etcd-mutex, then any other by name. It returns -1, 0 or +1 like cmp.Compare.
func CompareSystems(a, b string) int {
	return cmp.Or(cmp.Compare(orderOf(systemOrder, a), orderOf(systemOrder, b)), cmp.Compare(a, b))
}

// orderOf is s's place in order, len(order) for a name not in it.
func orderOf(order []string, s string) int {
	if i := slices.Index(order, s); i >= 0 {
		return i
	}
	return len(order)
}

// Median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Find returns the row of (workload, system, concurrency) with at least one
// measured round.
func (s Summary) Find(workload, system string, concurrency int) (Row, bool) {
	for _, r := range s.Rows {
		if r.Workload == workload && r.System == system && r.Concurrency == concurrency && r.Rounds > 0 {
			return r, true
		}
	}
	return Row{}, false
}

// ratios computes every comparison the report makes from rows and floor.
func ratios(rows []Row, floor FloorFigure) Ratios {
	s := Summary{Rows: rows}
	var out Ratios
	for _, r := range rows {
		if r.Rounds == 0 || IsPeer(r.System) {
			continue
		}
		if r.System == SystemHashicorp {
			if e, ok := s.Find(r.Workload, SystemEtcd, r.Concurrency); ok {
				out.Backends = append(out.Backends, BackendRatio{
					Workload: r.Workload, Concurrency: r.Concurrency,
					PerSec: e.PerSec / r.PerSec, P50: e.P50US / r.P50US, P99: e.P99US / r.P99US,
				})
			}
		}
		if r.Workload == WorkloadCommit && floor.FloorUS > 0 {
			fr := FloorRatio{
				System: r.System, Concurrency: r.Concurrency,
				P50US: r.P50US, FloorUS: floor.FloorUS, Ratio: r.P50US / floor.FloorUS,
			}
			if floor.BadgerFloorUS > 0 {
				fr.BadgerFloorUS, fr.BadgerRatio = floor.BadgerFloorUS, r.P50US/floor.BadgerFloorUS
			}
			out.Floor = append(out.Floor, fr)
		}
		for _, pair := range HoldingPairs {
			if r.Workload != pair[0] {
				continue
			}
			if o, ok := s.Find(pair[1], r.System, r.Concurrency); ok {
				out.Holding = append(out.Holding, HoldingRatio{
					Workload: pair[0], Over: pair[1], System: r.System, Concurrency: r.Concurrency,
					PerSec: r.PerSec, OverPerSec: o.PerSec, Ratio: r.PerSec / o.PerSec,
					P50: r.P50US / o.P50US, P99: r.P99US / o.P99US,
				})
			}
		}
		if ps := PeerSystem(r.Workload); ps != "" {
			if p, ok := s.Find(r.Workload, ps, r.Concurrency); ok {
				pr := PeerRatio{
					Workload: r.Workload, System: r.System, Concurrency: r.Concurrency,
					PerSec: r.PerSec, PeerPerSec: p.PerSec, Ratio: r.PerSec / p.PerSec,
				}
				if r.ServerCPUPer1k > 0 && p.ServerCPUPer1k > 0 {
					pr.ServerCPU = r.ServerCPUPer1k / p.ServerCPUPer1k
				}
				out.Peer = append(out.Peer, pr)
			}
		}
	}
	return out
}
