package report

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteMarkdown writes the summary as Markdown (summary.md): machine and
// settings, floor, one table per workload, the ratios, the aims and the notes.
// Call Summarize first. Errors: the first write error of w.
func (r *Report) WriteMarkdown(w io.Writer) error {
	ew := &errWriter{w: w}
	s := r.Summary
	st := r.Settings
	ew.printf("# ticketbench results\n\n")
	ew.printf("Run %s, took %s. Machine: %d CPUs, %s/%s, %s; data dir `%s`",
		r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Finished.Sub(r.Started).Round(time.Second),
		r.Machine.CPUs, r.Machine.GOOS, r.Machine.GOARCH, r.Machine.GoVersion, r.Machine.DataDir)
	if r.Machine.Device != "" {
		ew.printf(" on %s (%s)", r.Machine.Device, r.Machine.Filesystem)
	}
	if r.Machine.LoadAvgStart >= 0 && r.Machine.LoadAvgEnd >= 0 {
		ew.printf("; 1-minute load average %.2f at the start, %.2f at the end", r.Machine.LoadAvgStart, r.Machine.LoadAvgEnd)
	}
	ew.printf(".\n\n")
	mode := string(st.Mode)
	if st.RatePerSec > 0 {
		mode += fmt.Sprintf(" at %.0f ops/s", st.RatePerSec)
	}
	ew.printf("Settings: %d round(s) of %gs windows after %gs warm-up, %s loop, clients %s, backends %s (order alternating by round), etcd peer %s.\n\n",
		st.Rounds, st.DurationSec, st.WarmupSec, mode, joinInts(st.Concurrency), strings.Join(st.Backends, ", "), onOff(st.Peer))
	if st.ElectionTimeoutMS > 0 || st.HeartbeatMS > 0 || st.FailoverBackoffMaxMS > 0 || len(st.FailoverArgs) > 0 {
		ew.printf("Not the shipped defaults: Raft election timeout %d ms, heartbeat %d ms (0: default); failover SDK backoff cap %d ms (0: default); failover flags %q.\n\n",
			st.ElectionTimeoutMS, st.HeartbeatMS, st.FailoverBackoffMaxMS, st.FailoverArgs)
	}
	ew.printf("Every figure is the median over the rounds given in its row; `ops` is summed over those rounds. Latencies come from HdrHistograms (3 significant digits). CPU s / 1k ops: CPU seconds (/proc utime+stime) per 1,000 operations over the measured window, of the server processes (ticketd: its three nodes, in ticketbench's process; etcd: its three members, in the peer's process) and of the client process (every API workload's clients run in a process of their own; commit: the clients are goroutines of the server process, counted in its figure).\n\n")

	f := s.Floor
	ew.printf("## Physical floor\n\n")
	if f.Rounds == 0 {
		ew.printf("Not measured.\n\n")
	} else {
		ew.printf("| what | p50 | p99 | samples | rounds |\n|---|---:|---:|---:|---:|\n")
		ew.printf("| fsync: 100 B append + fdatasync on the data dir's disk | %s | %s | %d | %d |\n", FormatUS(f.FsyncP50US), FormatUS(f.FsyncP99US), f.FsyncSamples, f.Rounds)
		ew.printf("| TCP round trip on loopback, 64 B ping-pong | %s | %s | %d | %d |\n", FormatUS(f.RTTP50US), FormatUS(f.RTTP99US), f.RTTSamples, f.Rounds)
		if f.BadgerSamples > 0 {
			ew.printf("| badger: one 100 B write transaction, SyncWrites, same disk | %s | %s | %d | %d |\n", FormatUS(f.BadgerP50US), FormatUS(f.BadgerP99US), f.BadgerSamples, f.Rounds)
		}
		ew.printf("\nFloor = fsync p50 + RTT p50 = **%s**", FormatUS(f.FloorUS))
		if f.BadgerSamples > 0 {
			ew.printf("; badger floor = badger p50 + RTT p50 = **%s**", FormatUS(f.BadgerFloorUS))
		}
		ew.printf(".\n\n")
	}

	for _, wl := range workloadOrder {
		if IsHolding(wl) && !s.measured(wl) {
			continue // the shared-locks benchmark is optional; no empty tables
		}
		unit := "commits/s"
		switch {
		case wl == WorkloadLock || IsHolding(wl):
			unit = "cycles/s"
		case wl == WorkloadRenew:
			unit = "renewals/s"
		case wl == WorkloadKeepAlive:
			unit = "keep-alives/s"
		case wl == WorkloadHandoff:
			unit = "handoffs/s"
		}
		ew.printf("## %s\n\n", WorkloadTitle(wl))
		ew.printf("| system | clients | %s | p50 | p90 | p99 | p99.9 | server CPU s / 1k ops | client CPU s / 1k ops | ops | rounds | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n", unit)
		n := 0
		for _, row := range s.Rows {
			if row.Workload != wl {
				continue
			}
			n++
			ew.printf("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %d | %d | %d |\n",
				Label(row.Workload, row.System), row.Concurrency, FormatRate(row.PerSec),
				FormatUS(row.P50US), FormatUS(row.P90US), FormatUS(row.P99US), FormatUS(row.P999US),
				FormatCPU(row.ServerCPUPer1k), FormatCPU(row.ClientCPUPer1k),
				row.Ops, row.Rounds, row.Errors)
		}
		if n == 0 {
			ew.printf("| not measured | | | | | | | | | | | |\n")
		}
		ew.printf("\n")
	}

	ew.printf("## Ratios\n\n")
	ew.printf("### etcd ÷ hashicorp\n\nAbove 1× in throughput, etcd is faster; above 1× in latency, etcd is slower.\n\n")
	ew.table(len(s.Ratios.Backends), "Not measured (needs both backends).",
		"| workload | clients | throughput | p50 | p99 |\n|---|---:|---:|---:|---:|\n", func(i int) {
			b := s.Ratios.Backends[i]
			ew.printf("| %s | %d | %s | %s | %s |\n", b.Workload, b.Concurrency, FormatRatio(b.PerSec), FormatRatio(b.P50), FormatRatio(b.P99))
		})
	ew.printf("### Commit p50 ÷ floor\n\n")
	ew.table(len(s.Ratios.Floor), "Not measured.",
		fmt.Sprintf("| backend | clients | commit p50 | ÷ floor (%s) | ÷ badger floor (%s) |\n|---|---:|---:|---:|---:|\n", FormatUS(s.Floor.FloorUS), FormatUS(s.Floor.BadgerFloorUS)), func(i int) {
			fr := s.Ratios.Floor[i]
			ew.printf("| %s | %d | %s | %s | %s |\n", fr.System, fr.Concurrency, FormatUS(fr.P50US), FormatRatio(fr.Ratio), FormatRatio(fr.BadgerRatio))
		})
	lockPeer, renewPeer, keepAlivePeer, handoffPeer := peerRatios(s.Ratios.Peer)
	ew.printf("### Lock throughput ÷ etcd Mutex\n\n")
	ew.table(len(lockPeer), "Not measured (needs ticketd lock figures and the etcd peer).",
		"| system | clients | cycles/s | etcd Mutex cycles/s | ratio | server CPU per cycle ÷ etcd's |\n|---|---:|---:|---:|---:|---:|\n", func(i int) {
			pr := lockPeer[i]
			ew.printf("| %s | %d | %s | %s | %s | %s |\n", Label(WorkloadLock, pr.System), pr.Concurrency, FormatRate(pr.PerSec), FormatRate(pr.PeerPerSec), FormatRatio(pr.Ratio), FormatRatio(pr.ServerCPU))
		})
	ew.printf("### Session keep-alives ÷ etcd LeaseKeepAlive (%d locks per session, %d keys per lease)\n\n", KeepAliveKeys, KeepAliveKeys)
	ew.table(len(keepAlivePeer), "Not measured (needs ticketd keepalive figures and the etcd peer).",
		"| system | clients | keep-alives/s | etcd keep-alives/s | ratio | server CPU per keep-alive ÷ etcd's |\n|---|---:|---:|---:|---:|---:|\n", func(i int) {
			pr := keepAlivePeer[i]
			ew.printf("| %s | %d | %s | %s | %s | %s |\n", Label(WorkloadKeepAlive, pr.System), pr.Concurrency, FormatRate(pr.PerSec), FormatRate(pr.PeerPerSec), FormatRatio(pr.Ratio), FormatRatio(pr.ServerCPU))
		})
	ew.printf("### Renew throughput ÷ etcd LeaseKeepAlive\n\n")
	ew.table(len(renewPeer), "Not measured (needs ticketd renew figures and the etcd peer).",
		"| system | clients | renewals/s | etcd keep-alives/s | ratio |\n|---|---:|---:|---:|---:|\n", func(i int) {
			pr := renewPeer[i]
			ew.printf("| %s | %d | %s | %s | %s |\n", Label(WorkloadRenew, pr.System), pr.Concurrency, FormatRate(pr.PerSec), FormatRate(pr.PeerPerSec), FormatRatio(pr.Ratio))
		})

	ew.printf("### Contended handoffs ÷ etcd Mutex\n\n")
	ew.table(len(handoffPeer), "Not measured (needs ticketd handoff figures and the etcd peer).",
		"| system | clients | handoffs/s | etcd Mutex handoffs/s | ratio |\n|---|---:|---:|---:|---:|\n", func(i int) {
			pr := handoffPeer[i]
			ew.printf("| %s | %d | %s | %s | %s |\n", Label(WorkloadHandoff, pr.System), pr.Concurrency, FormatRate(pr.PerSec), FormatRate(pr.PeerPerSec), FormatRatio(pr.Ratio))
		})
	if len(s.Ratios.Holding) > 0 {
		ew.printf("### Shared locks and semaphores ÷ exclusive\n\nCycles/s of one case ÷ another's on the same backend and clients; above 1× in latency, the first case's cycles take longer.\n\n")
		ew.table(len(s.Ratios.Holding), "", "| system | clients | workload | ÷ workload | cycles/s | ÷ cycles/s | throughput | p50 | p99 |\n|---|---:|---|---|---:|---:|---:|---:|---:|\n", func(i int) {
			h := s.Ratios.Holding[i]
			ew.printf("| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", Label(h.Workload, h.System), h.Concurrency, h.Workload, h.Over,
				FormatRate(h.PerSec), FormatRate(h.OverPerSec), FormatRatio(h.Ratio), FormatRatio(h.P50), FormatRatio(h.P99))
		})
	}
	r.writeClusterEvents(ew)
	r.writeScale(ew)

	ew.printf("## Aims\n\n| aim | target | value | result | from |\n|---|---|---:|---|---|\n")
	for _, a := range s.Aims {
		ew.printf("| %s | %s | %s | %s | %s |\n", a.Name, a.Target, aimValue(a), heldWord(a), a.Detail)
	}
	if len(r.Notes) > 0 {
		ew.printf("\n## Notes\n\n")
		for _, n := range r.Notes {
			ew.printf("- %s\n", n)
		}
	}
	return ew.err
}

// table writes a Markdown table of n rows: header (the column and alignment
// lines), then row(i) for each i in [0, n), then a blank line. With no rows
// it writes the sentence missing as a paragraph instead.
func (e *errWriter) table(n int, missing, header string, row func(i int)) {
	if n == 0 {
		e.printf("%s\n\n", missing)
		return
	}
	e.printf("%s", header)
	for i := range n {
		row(i)
	}
	e.printf("\n")
}

// joinInts renders xs as "1, 16, 64".
func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ", ")
}

// onOff renders a switch as "on" or "off".
func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// peerRatios splits the peer comparisons into lock (etcd Mutex), renew and
// keepalive (etcd LeaseKeepAlive) and handoff (etcd Mutex, one prefix) ones;
// a ratio without a workload is a lock one.
func peerRatios(all []PeerRatio) (lock, renew, keepAlive, handoff []PeerRatio) {
	for _, pr := range all {
		switch pr.Workload {
		case WorkloadRenew:
			renew = append(renew, pr)
		case WorkloadKeepAlive:
			keepAlive = append(keepAlive, pr)
		case WorkloadHandoff:
			handoff = append(handoff, pr)
		default:
			lock = append(lock, pr)
		}
	}
	return lock, renew, keepAlive, handoff
}

// measured reports whether s has a row of workload with a measured round.
func (s Summary) measured(workload string) bool {
	for _, r := range s.Rows {
		if r.Workload == workload && r.Rounds > 0 {
			return true
		}
	}
	return false
}
