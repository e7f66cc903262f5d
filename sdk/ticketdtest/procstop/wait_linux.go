package procstop

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// pollEvery is how often WaitStopped reads the threads' states again.
const pollEvery = time.Millisecond

// WaitStopped waits until no thread of process pid runs, polling
// /proc/<pid>/task/*/stat: every thread's state is T (stopped by a
// signal) or t (stopped by a tracer), or the thread or the whole process
// has exited (Z, X, or gone). When some thread still runs after within, it
// returns an error naming pid and each such thread (its id, name and
// state, proc(5)).
func WaitStopped(pid int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		running, err := runningThreads(pid)
		if err != nil {
			return err
		}
		if len(running) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("procstop: pid %d: %d thread(s) still running %v after SIGSTOP: %s",
				pid, len(running), within, strings.Join(running, ", "))
		}
		time.Sleep(pollEvery)
	}
}

// runningThreads returns the threads of process pid that are not stopped
// and have not exited, each as "tid (name) state"; none when the process
// is gone.
func runningThreads(pid int) ([]string, error) {
	dir := filepath.Join("/proc", fmt.Sprint(pid), "task")
	tasks, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // exited and reaped
	}
	if err != nil {
		return nil, fmt.Errorf("procstop: pid %d: %w", pid, err)
	}
	var running []string
	for _, task := range tasks {
		stat, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue // the thread exited since the directory was read
		}
		if err != nil {
			return nil, fmt.Errorf("procstop: pid %d: %w", pid, err)
		}
		name, state, err := parseStat(stat)
		if err != nil {
			return nil, fmt.Errorf("procstop: pid %d thread %s: %w", pid, task.Name(), err)
		}
		switch state {
		case 'T', 't', 'Z', 'X', 'x':
		default:
			running = append(running, fmt.Sprintf("%s (%s) %c", task.Name(), name, state))
		}
	}
	return running, nil
}

// parseStat returns the name (comm) and the state letter of a thread from
// its /proc/<pid>/task/<tid>/stat line, "tid (comm) state ppid ...". The
// name may hold spaces and parentheses: it ends at the line's last ')'.
func parseStat(stat []byte) (name string, state byte, err error) {
	open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if open < 0 || end < open || end+2 >= len(stat) || stat[end+1] != ' ' {
		return "", 0, fmt.Errorf("unparsable stat line %q", stat)
	}
	return string(stat[open+1 : end]), stat[end+2], nil
}
