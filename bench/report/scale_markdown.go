package report

import (
	"fmt"
	"strings"
)

// writeScale writes the scale workload's section: one row per backend and
// step, then the renewals' data dirs. Nothing when the workload did not run.
func (r *Report) writeScale(ew *errWriter) {
	steps := r.Summary.Scale
	if len(steps) == 0 {
		return
	}
	ew.printf("## Scale (a table filled step by step, three ticketd processes per backend)\n\n")
	ew.printf("Per backend, one cluster filled with exclusive locks of long leases by many concurrent SDK clients; at each step: the fill rate of the step, Acquire latency of fresh keys (one client), `ticketctl snapshot save` (time, size) and `ticketd restore` of it, each node's data dir and RSS, a follower's kill -9 → /readyz 200, graceful transfers of leadership (TransferLeader → first write acknowledged after it, with writers running through it: writes refused are errors the writers saw after the SDK's retries, retried attempts are hidden by them), and kill -9s of the leader → first acknowledged write with the new leader's Raft leadership → promotion from its log. Figures per node are n1 / n2 / n3.\n\n")
	if set := r.Settings.Scale; set != nil {
		ew.printf("Settings: steps %s locks; %d SDK clients filling; %d graceful transfers and %d kill -9s of the leader and %d timed Acquires per step",
			joinInts(set.Steps), set.Clients, set.Kills, set.Kills, set.ProbeOps)
		if set.Sessions > 0 {
			ew.printf("; then %d sessions × %d locks added to the last step's table and measured as a step of their own (reported, not judged: the aims name the last exclusive step)", set.Sessions, set.SessionLocks)
		}
		if set.Renewals > 0 {
			ew.printf("; %d renewals after it", set.Renewals)
		}
		ew.printf(".\n\n")
	}
	ew.printf("| backend | locks | fill locks/s | acquire p50 | acquire p99 | transfer-leader (median) | writes refused / acknowledged | failover (median) | promotion (median) | follower restart → ready | snapshot save | snapshot size | restore | data dir | RSS |\n")
	ew.printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, st := range steps {
		ew.printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			st.System, st.Label(), FormatRate(st.FillPerSec), FormatUS(st.AcquireP50US), FormatUS(st.AcquireP99US),
			formatMS(st.TransferMedianMS()), formatRefused(st), formatMS(st.FailoverMedianMS()), formatMS(st.PromotionMedianMS()), formatMS(st.RestartReadyMS),
			formatMS(st.SnapshotSaveMS), FormatBytes(st.SnapshotBytes), formatMS(st.RestoreMS),
			joinBytes(st.DataDirBytes), joinBytes(st.RSSBytes))
	}
	ew.printf("\n")
	for _, st := range steps {
		if st.SessionLocks > 0 {
			ew.printf("- %s at %s locks: %s sessions holding %s locks filled at %s locks/s.\n", st.System, st.Label(),
				formatCount(st.Sessions), formatCount(st.SessionLocks), FormatRate(st.SessionFillPerSec))
		}
		if st.Renewals > 0 {
			ew.printf("- %s at %s locks: data dir after %s renewals %s (snapshot %s).\n", st.System, st.Label(),
				formatCount(st.Renewals), joinBytes(st.RenewedDataDirBytes), FormatBytes(st.SnapshotBytes))
		}
		if len(st.FailoverMS) > 1 || len(st.PromotionMS) > 1 {
			ew.printf("- %s at %s locks: failovers %s; promotions %s.\n", st.System, st.Label(), joinMS(st.FailoverMS), joinMS(st.PromotionMS))
		}
		if len(st.TransferMS) > 0 {
			ew.printf("- %s at %s locks: transfers %s; %d writes refused, %d acknowledged, %d attempts retried by the SDK.\n", st.System, st.Label(),
				joinMS(st.TransferMS), st.TransferRefused, st.TransferWrites, st.TransferRetried)
		}
		for _, e := range st.Errors {
			ew.printf("- %s at %s locks: %s\n", st.System, st.Label(), e)
		}
	}
	ew.printf("\n")
}

// writeScaleTable writes the scale workload's lines of the stdout table.
func (r *Report) writeScaleTable(ew *errWriter) {
	if len(r.Summary.Scale) == 0 {
		return
	}
	ew.printf("\nscale (per node n1 / n2 / n3):\n")
	for _, st := range r.Summary.Scale {
		ew.printf("  %-10s %6s locks: fill %s/s, acquire p50 %s p99 %s, transfer %s (refused %s), failover %s, promotion %s, restart→ready %s, snapshot save %s (%s), restore %s, data dir %s, RSS %s\n",
			st.System, st.Label(), FormatRate(st.FillPerSec), FormatUS(st.AcquireP50US), FormatUS(st.AcquireP99US),
			formatMS(st.TransferMedianMS()), formatRefused(st), formatMS(st.FailoverMedianMS()), formatMS(st.PromotionMedianMS()), formatMS(st.RestartReadyMS),
			formatMS(st.SnapshotSaveMS), FormatBytes(st.SnapshotBytes), formatMS(st.RestoreMS),
			joinBytes(st.DataDirBytes), joinBytes(st.RSSBytes))
		if st.Renewals > 0 {
			ew.printf("  %-10s %6s locks: data dir after %s renewals %s\n", st.System, st.Label(), formatCount(st.Renewals), joinBytes(st.RenewedDataDirBytes))
		}
		for _, e := range st.Errors {
			ew.printf("  %-10s %6s locks: %s\n", st.System, st.Label(), e)
		}
	}
}

// formatRefused renders a step's writes refused through its transfers
// of leadership over those acknowledged ("0 / 812"; "-" when none ran).
func formatRefused(st ScaleStep) string {
	if len(st.TransferMS) == 0 && st.TransferWrites == 0 && st.TransferRefused == 0 {
		return "-"
	}
	return fmt.Sprintf("%d / %d", st.TransferRefused, st.TransferWrites)
}

// formatMS renders milliseconds as FormatUS does microseconds ("-" for 0).
func formatMS(ms float64) string { return FormatUS(ms * 1000) }

// joinBytes renders per-node sizes as "37.6 MB / 38.0 MB / 37.9 MB".
func joinBytes(xs []int64) string {
	if len(xs) == 0 {
		return "-"
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = FormatBytes(x)
	}
	return strings.Join(parts, " / ")
}

// joinMS renders figures in milliseconds as "812ms, 1.02s".
func joinMS(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = formatMS(x)
	}
	return strings.Join(parts, ", ")
}
