package cputime

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Self returns this process's user+system CPU time so far; 0 if it cannot
// be read. Safe for concurrent use.
func Self() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Children returns the user+system CPU time of this process's children
// that have exited and been waited for, and of their own waited-for
// descendants (getrusage(RUSAGE_CHILDREN)); 0 if it cannot be read.
func Children() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Of returns the user+system CPU time of an exited process (with its
// waited-for descendants, as wait4 reports it); 0 for nil.
func Of(ps *os.ProcessState) time.Duration {
	if ps == nil {
		return 0
	}
	return ps.UserTime() + ps.SystemTime()
}

// Share is cpu ÷ (wall × runtime.NumCPU()): the fraction of the whole
// machine used; 0 for a non-positive wall.
func Share(cpu, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return cpu.Seconds() / (wall.Seconds() * float64(runtime.NumCPU()))
}

// Machine returns the CPU time all processes of the machine have used so far
// (user, nice, system, irq, softirq and steal of the "cpu" line of
// /proc/stat), so that the share of other work running beside the benchmark
// can be reported; 0 if it cannot be read.
func Machine() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var ticks uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system irq softirq steal
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/stat: 100 on every Linux
// architecture Go supports.
const clockTicks = 100
