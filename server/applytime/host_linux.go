//go:build linux

package applytime

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const supported = true

// HostClock returns the host's monotonic clock (CLOCK_MONOTONIC, the clock
// Go's time.Now measures elapsed time with on Linux; it stops while the host
// sleeps, so a lease measured on it is never short), whose epoch is the
// host's boot (/proc/sys/kernel/random/boot_id) and, inside a Linux time
// namespace, that namespace's offset of the clock (/proc/self/timens_offsets):
// a process started in another namespace reads another clock.
func HostClock() Host { return hostClock{} }

type hostClock struct{}

func (hostClock) Epoch() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	epoch := strings.TrimSpace(string(b))
	if ns, err := os.ReadFile("/proc/self/timens_offsets"); err == nil {
		for _, line := range strings.Split(string(ns), "\n") {
			if f := strings.Fields(line); len(f) == 3 && (f[0] == "monotonic" || f[0] == "1") {
				epoch += " " + f[1] + "." + f[2]
			}
		}
	}
	return epoch, nil
}

func (hostClock) Since() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, err
	}
	return time.Duration(ts.Nano()), nil
}

// lockFile takes an exclusive lock on f for this process, failing at once
// when another process holds it.
func lockFile(f *os.File) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fmt.Errorf("flock: %w", err)
	}
	return nil
}

// fallocate allocates the blocks of f's bytes [off, off+n) (fallocate(2)
// mode 0: f grows to off+n bytes if shorter), retrying when a signal
// interrupts it (EINTR). errNoFallocate where the file system has none;
// other errors are *os.PathError naming the file (ENOSPC: the disk is
// full). A variable so that a test can take allocate's path for file
// systems without it.
var fallocate = func(f *os.File, off, n int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, off, n)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
			return errNoFallocate
		}
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
}

// mapFile maps the first size bytes of f shared, readable and writable.
func mapFile(f *os.File, size int) ([]byte, error) {
	return unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

func unmapFile(b []byte) error { return unix.Munmap(b) }
