// Package cputime reads how much CPU a process used, so that ticketbench can
// say which share of the machine the load clients and the nodes had (issue
// 21, bench honesty): this process from getrusage(RUSAGE_SELF) (the figures
// /proc/self/stat gives as utime+stime), child processes from
// os.ProcessState once they have exited.
//
// # Usage
//
//  1. Read Self() before and after a part of the run, with its wall time.
//  2. Share(cpu, wall) is the fraction of all the machine's CPUs used.
package cputime
