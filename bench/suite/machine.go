package suite

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/ticketd/ticketd/bench/report"
)

// machine describes this machine and the filesystem dataDir is on.
func machine(dataDir string) report.Machine {
	m := report.Machine{
		CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
		GoVersion: runtime.Version(), DataDir: dataDir,
	}
	m.Device, m.Filesystem = mountOf(dataDir)
	m.LoadAvgStart, m.LoadAvgEnd = loadAvg(), -1
	return m
}

// loadAvg returns the 1-minute load average from /proc/loadavg, or -1.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// mountOf returns the device and filesystem type of the mount that holds dir,
// from /proc/mounts (the longest mount point that is a prefix of dir); empty
// strings where that cannot be read.
func mountOf(dir string) (device, fstype string) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", ""
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	f, err := os.Open("/proc/mounts")
	if err != nil {
		return "", ""
	}
	defer f.Close()
	best := -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		mp := fields[1]
		under := abs == mp || mp == "/" || strings.HasPrefix(abs, mp+"/")
		if under && len(mp) > best {
			best, device, fstype = len(mp), fields[0], fields[2]
		}
	}
	return device, fstype
}
