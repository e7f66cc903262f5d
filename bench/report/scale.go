package report

import (
	"cmp"
	"fmt"
	"slices"
)

// WorkloadScale is the scale workload: per backend, one cluster of three
// ticketd processes filled step by step with exclusive locks of long
// leases, and at each step the figures of ScaleStep (bench/scale).
const WorkloadScale = "scale"

// Aim thresholds of the scale workload, judged at its largest step
// (docs/benchmarks.md): what must not grow with the lock table.
const (
	// AimScaleFailoverFactor: median failover at the largest step at most
	// this many times the median at the smallest (and at most
	// AimFailoverMS).
	AimScaleFailoverFactor = 1.5
	// AimScalePromotionMS: median time from Raft leadership to ticketd's
	// promotion of the new leader, in milliseconds.
	AimScalePromotionMS = 50.0
	// AimScaleTransferMS: median graceful TransferLeader → first
	// acknowledged write, in milliseconds, with no write refused.
	AimScaleTransferMS = 500.0
	// AimScaleRestartMS: a follower's kill -9 → /readyz 200, in milliseconds.
	AimScaleRestartMS = 5000.0
	// AimScaleDataDirFactor: the largest node data dir at most this many
	// times the snapshot's size (after the extra renewals when run).
	AimScaleDataDirFactor = 3.0
	// AimScaleRSSBytes: the largest node RSS, in bytes (1.5 GB).
	AimScaleRSSBytes = 1.5e9
	// AimScaleFillFactor: fill rate of the largest step at least this many
	// times the step before.
	AimScaleFillFactor = 0.8
	// AimScaleSnapshotMS: `ticketctl snapshot save` and `ticketd restore`
	// each under this many milliseconds.
	AimScaleSnapshotMS = 5000.0
)

// UnitBytes is the unit of an Aim.Value in bytes.
const UnitBytes = "bytes"

// ScaleStep is what the scale workload measured on one backend's cluster
// holding Locks exclusive locks (and, on the sessions step, which follows
// the last exclusive step with the same Locks, also Sessions sessions of
// SessionLocks locks in all). A figure that was not measured is zero (or
// empty) and Errors says why.
type ScaleStep struct {
	// System is the backend, Locks the exclusive locks held (filled by this
	// step and the steps before it).
	System string `json:"system"`
	Locks  int    `json:"locks"`
	// Sessions and SessionLocks are the sessions held open and the locks
	// held under them, in all (0: none at this step).
	Sessions     int `json:"sessions,omitempty"`
	SessionLocks int `json:"session_locks,omitempty"`
	// FillPerSec is locks granted per second while this step filled the
	// table (SDK Acquires from many concurrent clients): exclusive locks,
	// or on the sessions step the locks under sessions (the sessions'
	// creation included), which SessionFillPerSec repeats.
	FillPerSec        float64 `json:"fill_per_sec"`
	SessionFillPerSec float64 `json:"session_fill_per_sec,omitempty"`
	// AcquireP50US and AcquireP99US are the latencies of AcquireOps
	// Acquires of fresh keys by one client (each released afterwards,
	// untimed), in microseconds.
	AcquireP50US float64 `json:"acquire_p50_us"`
	AcquireP99US float64 `json:"acquire_p99_us"`
	AcquireOps   int     `json:"acquire_ops"`
	// SnapshotSaveMS is the wall time of `ticketctl snapshot save`,
	// SnapshotBytes the size of the file it wrote, RestoreMS the wall time
	// of `ticketd restore` of that file into an empty data dir.
	SnapshotSaveMS float64 `json:"snapshot_save_ms"`
	SnapshotBytes  int64   `json:"snapshot_bytes"`
	RestoreMS      float64 `json:"restore_ms"`
	// DataDirBytes and RSSBytes are each node's disk use (allocated
	// blocks under its data dir) and resident set (/proc/<pid>/status
	// VmRSS), in node order, after the fill.
	DataDirBytes []int64 `json:"data_dir_bytes"`
	RSSBytes     []int64 `json:"rss_bytes"`
	// RestartReadyMS is a follower's kill -9 → its /readyz answering 200
	// (restarted at once on its data dir).
	RestartReadyMS float64 `json:"restart_ready_ms"`
	// FailoverMS holds one figure per kill -9 of the leader: the time to
	// the first write acknowledged through a survivor (as the failover
	// workload measures it). PromotionMS holds, per kill, the new leader's
	// time from winning the Raft election to ticketd's promotion, read
	// from its log (the Raft library's "entering leader state" or "became
	// leader" line, then ticketd's "leadership changed" with leader true).
	FailoverMS  []float64 `json:"failover_ms"`
	PromotionMS []float64 `json:"promotion_ms"`
	// TransferMS holds one figure per graceful transfer of leadership
	// (TransferLeader to any up-to-date voter, as `ticketctl
	// transfer-leader`): the call → the first write acknowledged after it
	// returned. TransferWrites counts the writes (Acquire, Release) that
	// writers running through the transfers had acknowledged,
	// TransferRefused those that returned an error to the writer after the
	// SDK's retries (the aim: none), TransferRetried the failed attempts
	// the SDK retried, hidden from the writer.
	TransferMS      []float64 `json:"transfer_ms,omitempty"`
	TransferWrites  int       `json:"transfer_writes,omitempty"`
	TransferRefused int       `json:"transfer_refused,omitempty"`
	TransferRetried int       `json:"transfer_retried,omitempty"`
	// Renewals is how many renewals of held locks ran after the step's
	// other figures, and RenewedDataDirBytes each node's data dir after
	// them (empty when none ran).
	Renewals            int     `json:"renewals,omitempty"`
	RenewedDataDirBytes []int64 `json:"renewed_data_dir_bytes,omitempty"`
	// Errors says which figures are missing and why.
	Errors []string `json:"errors,omitempty"`
}

// TotalLocks is every lock the step's table held: the exclusive ones and
// those under sessions.
func (s ScaleStep) TotalLocks() int { return s.Locks + s.SessionLocks }

// Label names the step's table by what it holds: "1M" (exclusive locks),
// or on the sessions step "1M + 10k sessions × 100 = 2M".
func (s ScaleStep) Label() string {
	if s.SessionLocks == 0 {
		return formatCount(s.Locks)
	}
	return fmt.Sprintf("%s + %s sessions × %s = %s", formatCount(s.Locks), formatCount(s.Sessions),
		formatCount(s.SessionLocks/max(s.Sessions, 1)), formatCount(s.TotalLocks()))
}

// FailoverMedianMS is the median of FailoverMS (0 when empty).
func (s ScaleStep) FailoverMedianMS() float64 { return Median(s.FailoverMS) }

// TransferMedianMS is the median of TransferMS (0 when empty).
func (s ScaleStep) TransferMedianMS() float64 { return Median(s.TransferMS) }

// PromotionMedianMS is the median of PromotionMS (0 when empty).
func (s ScaleStep) PromotionMedianMS() float64 { return Median(s.PromotionMS) }

// MaxDataDirBytes is the largest node data dir: after the renewals when
// they ran, else after the fill (0 when not measured).
func (s ScaleStep) MaxDataDirBytes() int64 {
	if len(s.RenewedDataDirBytes) > 0 {
		return slices.Max(s.RenewedDataDirBytes)
	}
	return maxOf(s.DataDirBytes)
}

// maxOf is the largest of xs, 0 for none.
func maxOf(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}

// summarizeScale returns steps ordered by system (report order), then
// exclusive locks, then locks under sessions (the sessions step after the
// exclusive step it was added to).
func summarizeScale(steps []ScaleStep) []ScaleStep {
	out := slices.Clone(steps)
	slices.SortStableFunc(out, func(a, b ScaleStep) int {
		return cmp.Or(CompareSystems(a.System, b.System), cmp.Compare(a.Locks, b.Locks), cmp.Compare(a.SessionLocks, b.SessionLocks))
	})
	return out
}

// scaleSystems returns each system's steps (ordered by locks), in report order.
func scaleSystems(steps []ScaleStep) [][]ScaleStep {
	var out [][]ScaleStep
	for _, st := range steps {
		if n := len(out); n > 0 && out[n-1][0].System == st.System {
			out[n-1] = append(out[n-1], st)
			continue
		}
		out = append(out, []ScaleStep{st})
	}
	return out
}

// scaleAims judges each backend's largest exclusive step (docs/benchmarks.md,
// the scale aims, which name a table of exclusive locks): failover,
// graceful transfer (time, refused writes), promotion, follower restart,
// RSS, fill rate, snapshot save and restore; and the data dir after the
// renewals on the step they followed (the run's last: the sessions step
// when there is one), against that step's snapshot. The sessions step's
// other figures are reported, not judged: its table is larger than the one
// the aims name. One "not measured" aim stands for all when the workload
// did not run.
func scaleAims(s Summary) []Aim {
	if len(s.Scale) == 0 {
		return []Aim{notMeasured("scale: failover, transfer, promotion, restart, disk, RSS, fill rate and snapshots at the largest table", "see docs/benchmarks.md", UnitMS, "scale workload not run")}
	}
	var out []Aim
	for _, all := range scaleSystems(s.Scale) {
		steps := slices.DeleteFunc(slices.Clone(all), func(st ScaleStep) bool { return st.SessionLocks > 0 })
		end := all[len(all)-1] // the renewals ran after its measurements
		if len(steps) == 0 {
			steps = all
		}
		first, last := steps[0], steps[len(steps)-1]
		at := fmt.Sprintf("at %s locks (%s)", formatCount(last.Locks), last.System)
		msAim := func(name string, v, limit float64, strict bool, detail string) Aim {
			target := fmt.Sprintf("≤ %.0f ms", limit)
			if strict {
				target = fmt.Sprintf("< %.0f ms", limit)
			}
			if v <= 0 {
				return notMeasured(name+" "+at, target, UnitMS, "no figure")
			}
			held := v <= limit
			if strict {
				held = v < limit
			}
			return Aim{Name: name + " " + at, Target: target, Unit: UnitMS, Measured: true, Held: held, Value: v, Detail: detail}
		}
		fo := last.FailoverMedianMS()
		out = append(out, msAim("scale: failover, kill -9 of the leader", fo, AimFailoverMS, false,
			fmt.Sprintf("median of %d kills", len(last.FailoverMS))))
		ratioName := fmt.Sprintf("scale: failover %s vs at %s locks", at, formatCount(first.Locks))
		ratioTarget := fmt.Sprintf("≤ %.1f×", AimScaleFailoverFactor)
		if f0 := first.FailoverMedianMS(); f0 > 0 && fo > 0 && len(steps) > 1 {
			out = append(out, Aim{Name: ratioName, Target: ratioTarget, Unit: UnitRatio, Measured: true,
				Held: fo/f0 <= AimScaleFailoverFactor, Value: fo / f0, Detail: fmt.Sprintf("median %.0f ms ÷ %.0f ms", fo, f0)})
		} else {
			out = append(out, notMeasured(ratioName, ratioTarget, UnitRatio, "needs failover figures at two steps"))
		}
		out = append(out, msAim("scale: graceful transfer-leader → first write", last.TransferMedianMS(), AimScaleTransferMS, false,
			fmt.Sprintf("median of %d transfers", len(last.TransferMS))))
		refusedName := "scale: writes refused through transfer-leader " + at
		if len(last.TransferMS) > 0 {
			out = append(out, Aim{Name: refusedName, Target: "0", Unit: UnitCount, Measured: true,
				Held: last.TransferRefused == 0, Value: float64(last.TransferRefused),
				Detail: fmt.Sprintf("errors returned to writers, of %d writes acknowledged; %d attempts retried by the SDK", last.TransferWrites, last.TransferRetried)})
		} else {
			out = append(out, notMeasured(refusedName, "0", UnitCount, "no transfer measured"))
		}
		out = append(out, msAim("scale: Raft leadership → promotion", last.PromotionMedianMS(), AimScalePromotionMS, false,
			fmt.Sprintf("median of %d, from the new leader's log", len(last.PromotionMS))))
		out = append(out, msAim("scale: follower kill -9 → ready", last.RestartReadyMS, AimScaleRestartMS, false, "/readyz 200 after a restart on its data dir"))
		out = append(out, msAim("scale: snapshot save", last.SnapshotSaveMS, AimScaleSnapshotMS, true,
			fmt.Sprintf("`ticketctl snapshot save`, %s", FormatBytes(last.SnapshotBytes))))
		out = append(out, msAim("scale: snapshot restore", last.RestoreMS, AimScaleSnapshotMS, true, "`ticketd restore` of one member"))

		diskName := fmt.Sprintf("scale: largest data dir vs snapshot at %s locks (%s)", end.Label(), end.System)
		diskTarget := fmt.Sprintf("≤ %.0f×", AimScaleDataDirFactor)
		if d := end.MaxDataDirBytes(); d > 0 && end.SnapshotBytes > 0 {
			ratio := float64(d) / float64(end.SnapshotBytes)
			after := "after the fill"
			if end.Renewals > 0 {
				after = fmt.Sprintf("after %s renewals", formatCount(end.Renewals))
			}
			out = append(out, Aim{Name: diskName, Target: diskTarget, Unit: UnitRatio, Measured: true,
				Held: ratio <= AimScaleDataDirFactor, Value: ratio,
				Detail: fmt.Sprintf("%s ÷ %s, %s", FormatBytes(d), FormatBytes(end.SnapshotBytes), after)})
		} else {
			out = append(out, notMeasured(diskName, diskTarget, UnitRatio, "no data dir or snapshot size"))
		}
		rssName := "scale: largest node RSS " + at
		rssTarget := fmt.Sprintf("≤ %s", FormatBytes(int64(AimScaleRSSBytes)))
		if r := maxOf(last.RSSBytes); r > 0 {
			out = append(out, Aim{Name: rssName, Target: rssTarget, Unit: UnitBytes, Measured: true,
				Held: float64(r) <= AimScaleRSSBytes, Value: float64(r), Detail: "VmRSS after the fill"})
		} else {
			out = append(out, notMeasured(rssName, rssTarget, UnitBytes, "no RSS read"))
		}
		fillName := "scale: fill rate " + at + " vs the step before"
		fillTarget := fmt.Sprintf("≥ %.1f×", AimScaleFillFactor)
		if len(steps) > 1 && steps[len(steps)-2].FillPerSec > 0 && last.FillPerSec > 0 {
			prev := steps[len(steps)-2]
			ratio := last.FillPerSec / prev.FillPerSec
			out = append(out, Aim{Name: fillName, Target: fillTarget, Unit: UnitRatio, Measured: true,
				Held: ratio >= AimScaleFillFactor, Value: ratio,
				Detail: fmt.Sprintf("%.0f locks/s ÷ %.0f locks/s at %s", last.FillPerSec, prev.FillPerSec, formatCount(prev.Locks))})
		} else {
			out = append(out, notMeasured(fillName, fillTarget, UnitRatio, "needs fill rates at two steps"))
		}
	}
	return out
}

// FormatBytes renders a size with a decimal unit and three significant
// digits: "812 B", "37.6 MB", "2.20 GB"; "-" for 0.
func FormatBytes(b int64) string {
	if b <= 0 {
		return "-"
	}
	units := []string{"B", "kB", "MB", "GB", "TB"}
	v, u := float64(b), 0
	for v >= 1000 && u < len(units)-1 {
		v /= 1000
		u++
	}
	switch {
	case u == 0:
		return fmt.Sprintf("%d B", b)
	case v < 10:
		return fmt.Sprintf("%.2f %s", v, units[u])
	case v < 100:
		return fmt.Sprintf("%.1f %s", v, units[u])
	}
	return fmt.Sprintf("%.0f %s", v, units[u])
}

// formatCount renders a lock count as 10k, 100k, 1M, or the number.
func formatCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// ScaleSettings are the scale workload's settings (ticketbench's -scale-*
// flags; 0 means the workload's default).
type ScaleSettings struct {
	// Steps are the table sizes in exclusive locks; Clients the SDK
	// clients that fill it; Kills the kill -9s of the leader (and the
	// graceful transfers) per step;
	// ProbeOps the Acquires timed per step.
	Steps    []int `json:"steps"`
	Clients  int   `json:"clients,omitempty"`
	Kills    int   `json:"kills,omitempty"`
	ProbeOps int   `json:"probe_ops,omitempty"`
	// Sessions × SessionLocks locks are added after the last step, as a
	// step of their own; Renewals renewals run after the last step (the
	// sessions step when there is one).
	Sessions     int `json:"sessions,omitempty"`
	SessionLocks int `json:"session_locks,omitempty"`
	Renewals     int `json:"renewals,omitempty"`
}
