package report

// writeClusterEvents writes the elections, failover and CPU share sections.
func (r *Report) writeClusterEvents(ew *errWriter) {
	s := r.Summary
	ew.printf("## Elections during the API workloads\n\n")
	ew.printf("Leader term after minus before each level of the API workloads (lock, renew, handoff and the shared-locks cases), read through Status (pre-vote on: the term grows only by a real election).\n\n")
	ew.table(len(s.Elections), "Not measured.",
		"| backend | levels watched | elections | levels at 256 clients | elections at 256 clients |\n|---|---:|---:|---:|---:|\n", func(i int) {
			e := s.Elections[i]
			ew.printf("| %s | %d | %d | %d | %d |\n", e.System, e.Levels, e.Total, e.AtMax, e.AtMaxElections)
		})
	ew.printf("## Failover (kill -9 of the leader, three ticketd processes)\n\n")
	ew.printf("Time from SIGKILL of the leader to the first write (an SDK Acquire of a fresh key, sent after the kill) acknowledged through a survivor, under a light write load; the killed node is restarted and caught up before the next kill.\n\n")
	ew.table(len(s.Failover), "Not measured.",
		"| backend | kills | median | min | max | without a figure |\n|---|---:|---:|---:|---:|---:|\n", func(i int) {
			f := s.Failover[i]
			ew.printf("| %s | %d | %s | %s | %s | %d |\n", f.System, f.Kills, FormatUS(f.MedianMS*1000), FormatUS(f.MinMS*1000), FormatUS(f.MaxMS*1000), f.Failed)
		})
	ew.printf("## CPU share (clients vs nodes)\n\n")
	ew.printf("CPU time (utime+stime from /proc/<pid>/stat) each process used over a part of the run, as a share of all %d CPUs over that part's wall time.\n\n", r.Machine.CPUs)
	ew.table(len(r.CPU), "Not measured.",
		"| part | process | CPU s | wall s | share of the machine |\n|---|---|---:|---:|---:|\n", func(i int) {
			c := r.CPU[i]
			ew.printf("| %s | %s | %.2f | %.2f | %.0f%% |\n", c.Part, c.Process, c.CPUSec, c.WallSec, 100*c.Share)
		})
}
