package scale

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/ticketd/ticketd/backends"
)

// dirBytes is the disk space the files under dir use: allocated blocks
// (backends.DiskUsage), so preallocated but unwritten WAL segments count as
// what they hold, not as their length.
func dirBytes(dir string) (int64, error) {
	allocated, _, err := backends.DiskUsage(dir)
	return allocated, err
}

// rssBytes is the resident set of process pid (VmRSS of
// /proc/<pid>/status), in bytes.
func rssBytes(pid int) (int64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("no process")
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest) // "123456 kB"
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("/proc/%d/status: VmRSS %q", pid, rest)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status: VmRSS %q: %w", pid, rest, err)
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}
