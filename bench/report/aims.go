package report

import (
	"cmp"
	"fmt"
	"slices"
)

// Aim thresholds: the aims listed in docs/benchmarks.md, on this
// project's 2-core machine.
const (
	// AimFloorFactorFaster: commit p50 at one client within this many times
	// the floor for the faster backend (lower p50 at one client);
	// AimFloorFactorOther for the other one.
	AimFloorFactorFaster = 2.0
	AimFloorFactorOther  = 2.5
	// AimCommitsPerSec: the faster backend commits more than this many
	// entries per second at AimCommitsConcurrency clients.
	AimCommitsPerSec = 20000.0
	// AimCommitsConcurrency is the client count AimCommitsPerSec is judged at.
	AimCommitsConcurrency = 64
	// AimPeerFactor: lock cycles/s through ticketd's API at least this many
	// times etcd Mutex's at every concurrency above one client;
	// AimPeerFactorOne at one client.
	AimPeerFactor    = 2.0
	AimPeerFactorOne = 1.5
	// AimHandoffFactor: contended handoffs/s at least this many times etcd
	// Mutex's at every N.
	AimHandoffFactor = 2.0
	// AimSnapshotFactor: commit p99 with snapshots and compaction running at
	// most this many times p99 with them off, at AimSnapshotConcurrency.
	AimSnapshotFactor      = 1.2
	AimSnapshotConcurrency = 64
	// AimRenewConcurrency: renewals/s at least etcd LeaseKeepAlive's at this
	// many clients.
	AimRenewConcurrency = 64
	// AimPeerFactorOther: lock cycles/s of the other (slower against etcd)
	// backend at least this many times etcd Mutex's at every concurrency.
	AimPeerFactorOther = 1.0
	// AimServerCPUFactor: server CPU seconds per 1,000 lock cycles (the
	// three ticketd nodes) at most this many times etcd's per 1,000 Mutex
	// cycles (its three members) at AimServerCPUConcurrency clients, the
	// clients in processes of their own.
	AimServerCPUFactor      = 0.5
	AimServerCPUConcurrency = 64
	// AimKeepAliveConcurrency: session keep-alives/s (sessions of
	// KeepAliveKeys locks) at least etcd LeaseKeepAlive's (leases of as many
	// keys) at this many clients.
	AimKeepAliveConcurrency = 64
	// AimFailoverMS: median time from kill -9 of the leader to the first
	// acknowledged write through a survivor, in milliseconds, per backend.
	AimFailoverMS = 1000.0
	// AimElectionsConcurrency: no election at all while this many clients
	// run the API workloads.
	AimElectionsConcurrency = 256
)

// Units of Aim.Value besides UnitRatio and UnitPerSec.
const (
	// UnitMS: milliseconds.
	UnitMS = "ms"
	// UnitCount: a plain count.
	UnitCount = "count"
)

// aims checks s against the targets; an aim with nothing to check is listed
// as not measured, so every target appears in every report.
func aims(s Summary) []Aim {
	var out []Aim
	out = append(out, floorAims(s)...)
	out = append(out, commitsAim(s))
	out = append(out, peerAims(s, WorkloadLock, "lock cycles/s vs etcd Mutex", []int{1, 16, 64, 256}, func(c int) float64 {
		if c == 1 {
			return AimPeerFactorOne
		}
		return AimPeerFactor
	})...)
	out = append(out, otherBackendAims(s, []int{1, 16, 64, 256})...)
	out = append(out, serverCPUAim(s))
	out = append(out, peerAims(s, WorkloadKeepAlive, fmt.Sprintf("session keep-alives/s (%d locks each) vs etcd LeaseKeepAlive (%d keys each)", KeepAliveKeys, KeepAliveKeys),
		[]int{AimKeepAliveConcurrency}, func(int) float64 { return 1 })...)
	out = append(out, peerAims(s, WorkloadHandoff, "contended handoffs/s vs etcd Mutex", []int{2, 8, 32}, func(int) float64 { return AimHandoffFactor })...)
	out = append(out, handoffLatencyAims(s)...)
	out = append(out, snapshotAims(s)...)
	out = append(out, peerAims(s, WorkloadRenew, "renewals/s vs etcd LeaseKeepAlive", []int{AimRenewConcurrency}, func(int) float64 { return 1 })...)
	out = append(out, failoverAims(s)...)
	out = append(out, electionAims(s)...)
	out = append(out, scaleAims(s)...)
	return out
}

// notMeasured is an aim the run has no figures for.
func notMeasured(name, target, unit, why string) Aim {
	return Aim{Name: name, Target: target, Unit: unit, Detail: "not measured (" + why + ")"}
}

// floorAims: commit p50 at one client ÷ floor, per backend; the backend with
// the lower p50 is held to AimFloorFactorFaster, the other to
// AimFloorFactorOther.
func floorAims(s Summary) []Aim {
	var at1 []FloorRatio
	for _, fr := range s.Ratios.Floor {
		if fr.Concurrency == 1 {
			at1 = append(at1, fr)
		}
	}
	if len(at1) == 0 {
		return []Aim{notMeasured("commit p50 at 1 client vs floor", fmt.Sprintf("≤ %.1f× (faster) / %.1f× (other) (fsync p50 + RTT p50)", AimFloorFactorFaster, AimFloorFactorOther), UnitRatio, "no commit figures at 1 client, or no floor")}
	}
	fastest := slices.MinFunc(at1, func(a, b FloorRatio) int {
		switch {
		case a.P50US < b.P50US:
			return -1
		case a.P50US > b.P50US:
			return 1
		}
		return 0
	})
	var out []Aim
	for _, fr := range at1 {
		limit, which := AimFloorFactorOther, "other backend"
		if fr.System == fastest.System {
			limit, which = AimFloorFactorFaster, "faster backend"
		}
		out = append(out, Aim{
			Name: fmt.Sprintf("commit p50 at 1 client vs floor (%s)", fr.System), Unit: UnitRatio,
			Target:   fmt.Sprintf("≤ %.1f× (fsync p50 + RTT p50), %s", limit, which),
			Measured: true, Held: fr.Ratio <= limit, Value: fr.Ratio,
			Detail: fmt.Sprintf("p50 %.0f µs ÷ floor %.0f µs", fr.P50US, fr.FloorUS),
		})
	}
	return out
}

// commitsAim: the faster backend's commits/s at AimCommitsConcurrency.
func commitsAim(s Summary) Aim {
	thr := notMeasured(fmt.Sprintf("commits/s at %d clients, faster backend", AimCommitsConcurrency),
		fmt.Sprintf("> %.0f", AimCommitsPerSec), UnitPerSec, fmt.Sprintf("no commit figures at %d clients", AimCommitsConcurrency))
	for _, r := range s.Rows {
		if r.Workload == WorkloadCommit && r.Concurrency == AimCommitsConcurrency && r.Rounds > 0 &&
			(!thr.Measured || r.PerSec > thr.Value) {
			thr.Measured, thr.Value = true, r.PerSec
			thr.Held = r.PerSec > AimCommitsPerSec
			thr.Detail = fmt.Sprintf("%s, median of %d rounds, %d commits", r.System, r.Rounds, r.Ops)
		}
	}
	return thr
}

// peerAims: ticketd's (faster backend's) throughput ÷ the peer's for
// workload at each of levels, against factor(level).
func peerAims(s Summary, workload, name string, levels []int, factor func(int) float64) []Aim {
	best := map[int]PeerRatio{}
	for _, pr := range s.Ratios.Peer {
		if pr.Workload != workload && !(pr.Workload == "" && workload == WorkloadLock) {
			continue
		}
		if b, ok := best[pr.Concurrency]; !ok || pr.Ratio > b.Ratio {
			best[pr.Concurrency] = pr
		}
	}
	var out []Aim
	for _, c := range levels {
		aimName := fmt.Sprintf("%s at %s", name, Clients(c))
		target := fmt.Sprintf("≥ %.1f×", factor(c))
		pr, ok := best[c]
		if !ok {
			out = append(out, notMeasured(aimName, target, UnitRatio, "no figures for both ticketd and the etcd peer"))
			continue
		}
		out = append(out, Aim{
			Name: aimName, Unit: UnitRatio, Target: target,
			Measured: true, Held: pr.Ratio >= factor(c), Value: pr.Ratio,
			Detail: fmt.Sprintf("ticketd (%s) %.0f/s ÷ etcd %.0f/s", pr.System, pr.PerSec, pr.PeerPerSec),
		})
	}
	return out
}

// handoffLatencyAims: per backend and N, handoff p50 ÷ the backend's own
// commit p50 at one client, at most 1.
func handoffLatencyAims(s Summary) []Aim {
	var out []Aim
	for _, r := range s.Rows {
		if r.Workload != WorkloadHandoff || IsPeer(r.System) || r.Rounds == 0 {
			continue
		}
		name := fmt.Sprintf("handoff p50 vs commit p50 at 1 client (%s, %s)", r.System, Clients(r.Concurrency))
		c, ok := s.Find(WorkloadCommit, r.System, 1)
		if !ok || c.P50US <= 0 {
			out = append(out, notMeasured(name, "≤ 1×", UnitRatio, "no commit figure at 1 client"))
			continue
		}
		ratio := r.P50US / c.P50US
		out = append(out, Aim{
			Name: name, Unit: UnitRatio, Target: "≤ 1×",
			Measured: true, Held: ratio <= 1, Value: ratio,
			Detail: fmt.Sprintf("handoff p50 %.0f µs ÷ commit p50 %.0f µs", r.P50US, c.P50US),
		})
	}
	if len(out) == 0 {
		out = append(out, notMeasured("handoff p50 vs commit p50 at 1 client", "≤ 1×", UnitRatio, "no handoff figures"))
	}
	return out
}

// snapshotAims: per backend, p99 with snapshots on ÷ p99 with them off.
func snapshotAims(s Summary) []Aim {
	var out []Aim
	target := fmt.Sprintf("≤ %.1f×", AimSnapshotFactor)
	for _, on := range s.Rows {
		if on.Workload != WorkloadSnapshotsOn || on.Rounds == 0 {
			continue
		}
		name := fmt.Sprintf("commit p99 snapshots on vs off at %s (%s)", Clients(on.Concurrency), on.System)
		off, ok := s.Find(WorkloadSnapshotsOff, on.System, on.Concurrency)
		if !ok || off.P99US <= 0 {
			out = append(out, notMeasured(name, target, UnitRatio, "no figure with snapshots off"))
			continue
		}
		ratio := on.P99US / off.P99US
		out = append(out, Aim{
			Name: name, Unit: UnitRatio, Target: target,
			Measured: true, Held: ratio <= AimSnapshotFactor, Value: ratio,
			Detail: fmt.Sprintf("p99 %.0f µs on ÷ %.0f µs off", on.P99US, off.P99US),
		})
	}
	if len(out) == 0 {
		out = append(out, notMeasured("commit p99 snapshots on vs off", target, UnitRatio, "snapshot workloads not run"))
	}
	return out
}

// failoverAims: per backend, the median failover time.
func failoverAims(s Summary) []Aim {
	var out []Aim
	target := fmt.Sprintf("median ≤ %.0f ms", AimFailoverMS)
	for _, f := range s.Failover {
		name := fmt.Sprintf("failover, kill -9 of the leader (%s)", f.System)
		if f.Kills == 0 {
			out = append(out, notMeasured(name, target, UnitMS, fmt.Sprintf("%d kills, none gave a figure", f.Failed)))
			continue
		}
		out = append(out, Aim{
			Name: name, Unit: UnitMS, Target: target,
			Measured: true, Held: f.MedianMS <= AimFailoverMS, Value: f.MedianMS,
			Detail: fmt.Sprintf("median of %d kills, min %.0f ms, max %.0f ms, %d without a figure", f.Kills, f.MinMS, f.MaxMS, f.Failed),
		})
	}
	if len(out) == 0 {
		out = append(out, notMeasured("failover, kill -9 of the leader", target, UnitMS, "failover not run"))
	}
	return out
}

// electionAims: per backend, elections during the levels at
// AimElectionsConcurrency clients.
func electionAims(s Summary) []Aim {
	var out []Aim
	for _, e := range s.Elections {
		name := fmt.Sprintf("elections during the %d-client API runs (%s)", AimElectionsConcurrency, e.System)
		if e.AtMax == 0 {
			out = append(out, notMeasured(name, "0", UnitCount, fmt.Sprintf("no level at %d clients", AimElectionsConcurrency)))
			continue
		}
		out = append(out, Aim{
			Name: name, Unit: UnitCount, Target: "0",
			Measured: true, Held: e.AtMaxElections == 0, Value: float64(e.AtMaxElections),
			Detail: fmt.Sprintf("term growth over %d levels at %d clients; %d over all %d levels watched", e.AtMax, AimElectionsConcurrency, e.Total, e.Levels),
		})
	}
	if len(out) == 0 {
		out = append(out, notMeasured(fmt.Sprintf("elections during the %d-client API runs", AimElectionsConcurrency), "0", UnitCount, "no API workload watched"))
	}
	return out
}

// lockPeerRatios returns the lock workload's ratios to etcd Mutex at
// concurrency c, one per ticketd backend.
func lockPeerRatios(s Summary, c int) []PeerRatio {
	var out []PeerRatio
	for _, pr := range s.Ratios.Peer {
		if (pr.Workload == WorkloadLock || pr.Workload == "") && pr.Concurrency == c {
			out = append(out, pr)
		}
	}
	return out
}

// otherBackendAims: at each of levels, the backend with the lower lock
// cycles/s ÷ etcd Mutex (the faster one is held by peerAims) against
// AimPeerFactorOther; not measured unless two backends have figures.
func otherBackendAims(s Summary, levels []int) []Aim {
	var out []Aim
	target := fmt.Sprintf("≥ %.1f×", AimPeerFactorOther)
	for _, c := range levels {
		name := fmt.Sprintf("lock cycles/s vs etcd Mutex at %s, other backend", Clients(c))
		prs := lockPeerRatios(s, c)
		if len(prs) < 2 {
			out = append(out, notMeasured(name, target, UnitRatio, "needs both backends and the etcd peer"))
			continue
		}
		pr := slices.MinFunc(prs, func(a, b PeerRatio) int { return cmp.Compare(a.Ratio, b.Ratio) })
		out = append(out, Aim{
			Name: name, Unit: UnitRatio, Target: target,
			Measured: true, Held: pr.Ratio >= AimPeerFactorOther, Value: pr.Ratio,
			Detail: fmt.Sprintf("ticketd (%s) %.0f/s ÷ etcd %.0f/s", pr.System, pr.PerSec, pr.PeerPerSec),
		})
	}
	return out
}

// serverCPUAim: the lowest ticketd server CPU per lock cycle ÷ etcd's
// server CPU per Mutex cycle over the backends, at AimServerCPUConcurrency.
func serverCPUAim(s Summary) Aim {
	name := fmt.Sprintf("server CPU per 1,000 lock cycles vs etcd Mutex at %s", Clients(AimServerCPUConcurrency))
	target := fmt.Sprintf("≤ %.1f×", AimServerCPUFactor)
	var prs []PeerRatio
	for _, pr := range lockPeerRatios(s, AimServerCPUConcurrency) {
		if pr.ServerCPU > 0 {
			prs = append(prs, pr)
		}
	}
	if len(prs) == 0 {
		return notMeasured(name, target, UnitRatio, "needs ticketd and etcd Mutex lock rows with server CPU metered")
	}
	pr := slices.MinFunc(prs, func(a, b PeerRatio) int { return cmp.Compare(a.ServerCPU, b.ServerCPU) })
	t, _ := s.Find(WorkloadLock, pr.System, AimServerCPUConcurrency)
	e, _ := s.Find(WorkloadLock, SystemEtcdMutex, AimServerCPUConcurrency)
	return Aim{
		Name: name, Unit: UnitRatio, Target: target,
		Measured: true, Held: pr.ServerCPU <= AimServerCPUFactor, Value: pr.ServerCPU,
		Detail: fmt.Sprintf("ticketd (%s) nodes %.3f s ÷ etcd members %.3f s per 1,000 cycles", pr.System, t.ServerCPUPer1k, e.ServerCPUPer1k),
	}
}
