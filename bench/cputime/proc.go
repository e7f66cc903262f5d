package cputime

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrProc: a process's CPU time could not be read from /proc (no such
// process, not Linux, or a stat line of an unknown form).
var ErrProc = errors.New("cputime: /proc")

// PID returns the user+system CPU time process pid has used so far: fields
// 14 (utime) and 15 (stime) of /proc/<pid>/stat, in USER_HZ ticks (proc(5)),
// summed over every thread of the process, whether it still runs or not.
// The resolution is a tick (10 ms). Errors: ErrProc, wrapped.
func PID(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrProc, err)
	}
	return parseStat(string(b))
}

// parseStat reads utime+stime from one /proc/<pid>/stat line. The command
// name (field 2) is in parentheses and may itself hold spaces and ")", so
// the fields are counted from the last ")".
func parseStat(line string) (time.Duration, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: stat line without a command name: %q", ErrProc, line)
	}
	// After ")": field 3 (state) onwards; utime is field 14, stime field 15.
	f := strings.Fields(line[i+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(f) <= stime {
		return 0, fmt.Errorf("%w: stat line of %d fields", ErrProc, len(f)+2)
	}
	var ticks uint64
	for _, j := range []int{utime, stime} {
		v, err := strconv.ParseUint(f[j], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: field %d: %v", ErrProc, j+3, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
