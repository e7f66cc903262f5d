// Package cputime reads how much CPU a process used, so that ticketbench can
// say which share of the machine the load clients and the nodes had (a
// figure measured on a machine the clients saturate says little about the
// server) and what one operation costs in CPU on each side (the CPU aims of
// docs/benchmarks.md): this process from getrusage(RUSAGE_SELF) (the figures
// /proc/self/stat gives as utime+stime), any running process from
// /proc/<pid>/stat (PID), child processes from os.ProcessState once they
// have exited.
//
// # Usage
//
//  1. Read Self() before and after a part of the run, with its wall time.
//  2. Share(cpu, wall) is the fraction of all the machine's CPUs used.
//  3. For a measured window, a Meter lists the server and the client
//     processes; Sample it at both edges and Between gives the Usage of
//     each side (package load does this when load.Config.CPU is set).
//
// Example:
//
//	m := cputime.Meter{Servers: []int{os.Getppid()}, Clients: []int{0}}
//	a, _ := m.Sample()
//	// ... the window ...
//	b, _ := m.Sample()
//	u := m.Between(a, b) // u.ServerSec, u.ClientSec
package cputime
