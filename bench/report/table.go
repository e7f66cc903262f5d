package report

import (
	"cmp"
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable writes the summary as aligned plain text (the stdout table):
// floor, one line per Row, the ratios and the aims. Call Summarize first.
// Errors: the first write error of w.
func (r *Report) WriteTable(w io.Writer) error {
	s := r.Summary
	ew := &errWriter{w: w}
	if r.Machine.LoadAvgStart >= 0 && r.Machine.LoadAvgEnd >= 0 {
		ew.printf("Machine: %d CPUs, 1-minute load average %.2f at the start, %.2f at the end.\n", r.Machine.CPUs, r.Machine.LoadAvgStart, r.Machine.LoadAvgEnd)
	}
	f := s.Floor
	if f.Rounds > 0 {
		ew.printf("Physical floor (median of %d rounds): fsync p50 %s p99 %s (%d samples), loopback RTT p50 %s p99 %s (%d samples); floor = fsync p50 + RTT p50 = %s\n\n",
			f.Rounds, FormatUS(f.FsyncP50US), FormatUS(f.FsyncP99US), f.FsyncSamples,
			FormatUS(f.RTTP50US), FormatUS(f.RTTP99US), f.RTTSamples, FormatUS(f.FloorUS))
		if f.BadgerSamples > 0 {
			ew.printf("Badger sync write (median of %d rounds): p50 %s p99 %s (%d samples); badger floor = badger p50 + RTT p50 = %s\n\n",
				f.Rounds, FormatUS(f.BadgerP50US), FormatUS(f.BadgerP99US), f.BadgerSamples, FormatUS(f.BadgerFloorUS))
		}
	}
	// Text columns are padded to one width so they read left-aligned in a
	// right-aligned (numeric) table.
	wWidth, sWidth := len("workload"), len("system")
	for _, row := range s.Rows {
		wWidth = max(wWidth, len(row.Workload))
		sWidth = max(sWidth, len(Label(row.Workload, row.System)))
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\t%-*s\tclients\tops/s\tp50\tp90\tp99\tp99.9\tsrv CPU s/1k\tcli CPU s/1k\tops\trounds\terrors\t\n", wWidth, "workload", sWidth, "system")
	for _, row := range s.Rows {
		fmt.Fprintf(tw, "%-*s\t%-*s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t\n",
			wWidth, row.Workload, sWidth, Label(row.Workload, row.System), row.Concurrency, FormatRate(row.PerSec),
			FormatUS(row.P50US), FormatUS(row.P90US), FormatUS(row.P99US), FormatUS(row.P999US),
			FormatCPU(row.ServerCPUPer1k), FormatCPU(row.ClientCPUPer1k),
			row.Ops, row.Rounds, row.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ew.printf("srv/cli CPU s/1k: CPU seconds per 1,000 operations over the window (/proc utime+stime) of the server processes (ticketd: the three nodes in ticketbench; etcd: its three members) and of the client process; commit: clients inside the server process.\n")
	if len(s.Ratios.Backends) > 0 {
		ew.printf("\netcd ÷ hashicorp (medians):\n")
		tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%-*s\tclients\tops/s\tp50\tp99\t\n", wWidth, "workload")
		for _, b := range s.Ratios.Backends {
			fmt.Fprintf(tw, "%-*s\t%d\t%s\t%s\t%s\t\n", wWidth, b.Workload, b.Concurrency,
				FormatRatio(b.PerSec), FormatRatio(b.P50), FormatRatio(b.P99))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(s.Ratios.Floor) > 0 {
		ew.printf("\ncommit p50 ÷ floor (%s) [÷ badger floor (%s)]:\n", FormatUS(s.Floor.FloorUS), FormatUS(s.Floor.BadgerFloorUS))
		for _, fr := range s.Ratios.Floor {
			ew.printf("  %-10s %12s  %s  [%s]\n", fr.System, Clients(fr.Concurrency), FormatRatio(fr.Ratio), FormatRatio(fr.BadgerRatio))
		}
	}
	if len(s.Ratios.Peer) > 0 {
		ew.printf("\nthroughput ÷ etcd peer (lock: Mutex cycles/s; renew, keepalive: LeaseKeepAlive/s; handoff: Mutex handoffs/s on one prefix), and server CPU per operation ÷ the peer's:\n")
		for _, pr := range s.Ratios.Peer {
			wl := cmp.Or(pr.Workload, WorkloadLock)
			ew.printf("  %-9s %-18s %12s  %-7s server CPU %s\n", wl, Label(wl, pr.System), Clients(pr.Concurrency), FormatRatio(pr.Ratio), FormatRatio(pr.ServerCPU))
		}
	}
	if len(s.Ratios.Holding) > 0 {
		ew.printf("\nshared locks and semaphores (cycles/s ÷ cycles/s, same backend and clients):\n")
		for _, h := range s.Ratios.Holding {
			ew.printf("  %-18s %12s  %-13s ÷ %-13s %s  (p50 %s, p99 %s)\n", h.System, Clients(h.Concurrency), h.Workload, h.Over,
				FormatRatio(h.Ratio), FormatRatio(h.P50), FormatRatio(h.P99))
		}
	}
	r.writeScaleTable(ew)
	ew.printf("\naims:\n")
	for _, a := range s.Aims {
		ew.printf("  [%s] %s: %s (target %s; %s)\n", heldWord(a), a.Name, aimValue(a), a.Target, a.Detail)
	}
	for _, n := range r.Notes {
		ew.printf("note: %s\n", n)
	}
	return ew.err
}

// aimValue renders an aim's figure in its unit, "-" when not measured.
func aimValue(a Aim) string {
	switch {
	case !a.Measured:
		return "-"
	case a.Unit == UnitPerSec:
		return FormatRate(a.Value) + "/s"
	case a.Unit == UnitMS:
		return fmt.Sprintf("%.0f ms", a.Value)
	case a.Unit == UnitCount:
		return fmt.Sprintf("%.0f", a.Value)
	case a.Unit == UnitBytes:
		return FormatBytes(int64(a.Value))
	}
	return FormatRatio(a.Value)
}

// errWriter keeps the first write error so formatting code can ignore it.
type errWriter struct {
	w   io.Writer
	err error
}

// Write implements io.Writer; after the first error it writes nothing.
func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// printf formats to e; a write error is kept in e.err.
func (e *errWriter) printf(format string, args ...any) {
	fmt.Fprintf(e, format, args...)
}
