//go:build linux

package hosts

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// namePrefix starts the name of every namespace this package creates:
// "td-<pid>-", so a sweep can tell the namespaces of dead runs.
const namePrefix = "td-"

// ip runs `ip args...` and returns its error with the command's output.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("hosts: ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// supported returns nil when this process can create network namespaces:
// it runs as root and finds `ip`. The error wraps ErrUnsupported.
func supported() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root (euid %d)", ErrUnsupported, os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: needs the ip command (iproute2): %w", ErrUnsupported, err)
	}
	return nil
}

// addNS creates the namespace name with its loopback up.
func addNS(name string) error {
	if err := ip("netns", "add", name); err != nil {
		return err
	}
	return ip("-n", name, "link", "set", "lo", "up")
}

// delNS kills every process left in namespace name (only processes this
// package started live there) and deletes it.
func delNS(name string) error {
	out, _ := exec.Command("ip", "netns", "pids", name).Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return ip("netns", "del", name)
}

// sweepStale deletes namespaces named td-<pid>-… whose pid is no longer a
// live process: what runs killed before their cleanup left behind.
func sweepStale() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], namePrefix) {
			continue
		}
		rest := strings.TrimPrefix(f[0], namePrefix)
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if !alive(pid) {
			_ = delNS(f[0])
		}
	}
}

// alive reports whether process pid exists and is not a zombie (a run
// killed a moment ago may not be reaped yet).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// nsExists reports whether the named namespace exists.
func nsExists(name string) bool {
	_, err := os.Stat("/run/netns/" + name)
	return err == nil
}
