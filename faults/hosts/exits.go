//go:build linux

package hosts

import (
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"time"
)

// exitState is what a Node knows of how its process ends: whether this
// package asked for the end (Kill, Close: SIGKILL), and, once the process
// has exited, how and whether that was unexpected. Guarded by Node.mu.
type exitState struct {
	killing    bool   // SIGKILL was sent to the current process
	unexpected string // the last unexpected exit, "" when none
}

// exitRecord is the JSON line appended to a node's log when its process
// exits, in the shape of the node's own zap lines (level, ts, logger, msg,
// node), so that a node that dies without a word of its own (kill -9 from
// outside, the OOM killer, a parent-death signal) still leaves a line that
// says so and when.
type exitRecord struct {
	Level    string  `json:"level"`
	TS       float64 `json:"ts"`
	Logger   string  `json:"logger"`
	Msg      string  `json:"msg"`
	Node     string  `json:"node"`
	PID      int     `json:"pid"`
	Status   string  `json:"status"`
	Expected bool    `json:"expected"`
}

// expectKill records that SIGKILL is being sent to n's current process by
// this package, so that its exit is not reported as unexpected; n.mu held.
func (n *Node) expectKill() { n.exit.killing = true }

// watchExit waits for cmd (n's process, just started, whose output goes to
// log) to exit, appends an exitRecord to log, notes an exit this package
// did not ask for (Node.UnexpectedExit), then closes log and exited.
func (n *Node) watchExit(cmd *exec.Cmd, log io.WriteCloser, exited chan struct{}) {
	err := cmd.Wait()
	status := "exit status 0"
	if cmd.ProcessState != nil {
		status = cmd.ProcessState.String()
	} else if err != nil {
		status = err.Error()
	}
	n.mu.Lock()
	expected := n.exit.killing
	n.exit.killing = false
	if !expected {
		n.exit.unexpected = fmt.Sprintf("%s (pid %d) exited without a kill from this package at %s: %s",
			n.ID, cmd.Process.Pid, time.Now().UTC().Format("15:04:05.000"), status)
	}
	n.mu.Unlock()
	rec := exitRecord{
		Level: "warn", TS: float64(time.Now().UnixNano()) / 1e9, Logger: "hosts",
		Msg: "process exited", Node: n.ID, PID: cmd.Process.Pid, Status: status, Expected: expected,
	}
	if expected {
		rec.Level = "info"
	}
	if b, err := json.Marshal(rec); err == nil {
		_, _ = log.Write(append(b, '\n'))
	}
	_ = log.Close()
	close(exited)
}

// UnexpectedExit describes the last exit of n's process that this package
// did not cause (not Kill, Restart, Move or Close): a node that stopped on
// its own (a fail-stop after a disk fault exits with status 1, which the
// disk nemesis expects) or was killed from outside, e.g. "n1 (pid 3325)
// exited without a kill from this package at 00:31:47.512: signal:
// killed". It is "" when there was none. A pause (SIGSTOP) is not an exit.
func (n *Node) UnexpectedExit() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.exit.unexpected
}
