package failover

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/ticketd/ticketd/bench/cputime"
)

// Node is one ticketd process of a Cluster, restartable on the same data
// directory.
type Node struct {
	// ID is its member id; APIAddr and RaftAddr its loopback addresses;
	// DataDir its data directory; LogFile where its output is appended
	// (every incarnation's).
	ID, APIAddr, RaftAddr, DataDir, LogFile string

	args []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	cpuUsed time.Duration // user+system time of the incarnations that exited
}

// start launches the process (its output appended to logFile).
func (n *Node) start(bin string) error {
	logf, err := os.OpenFile(n.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	cmd := exec.Command(bin, n.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("failover: start %s: %w", n.ID, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		n.mu.Lock()
		n.cpuUsed += cputime.Of(cmd.ProcessState)
		n.mu.Unlock()
		close(exited)
	}()
	n.mu.Lock()
	n.cmd, n.exited = cmd, exited
	n.mu.Unlock()
	return nil
}

// stop sends sig and waits up to d for the exit, then kills the process.
func (n *Node) stop(sig syscall.Signal, d time.Duration) {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// PID returns the process id of the current incarnation (0 before the
// first start); the process may have exited since.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// cpu returns the CPU time of the incarnations that have exited.
func (n *Node) cpu() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cpuUsed
}

// Build compiles server/cmd/ticketd from repoRoot (the repository root; ""
// means the nearest directory above the working directory holding go.work)
// into outDir and returns the binary's path. Errors: ErrBuild with the
// compiler's output, or ctx's error.
func Build(ctx context.Context, repoRoot, outDir string) (string, error) {
	return BuildCommand(ctx, repoRoot, outDir, "ticketd")
}

// BuildCommand is Build for server/cmd/<name> (ticketd, ticketctl).
func BuildCommand(ctx context.Context, repoRoot, outDir, name string) (string, error) {
	if repoRoot == "" {
		var err error
		if repoRoot, err = findRoot(); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(outDir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./server/cmd/"+name)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("%w: %v: %s", ErrBuild, err, out)
	}
	return bin, nil
}

// findRoot walks up from the working directory to the one holding go.work.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBuild, err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w: no go.work above the working directory", ErrBuild)
		}
		dir = parent
	}
}
