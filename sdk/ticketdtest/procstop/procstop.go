// Package procstop pauses a process with SIGSTOP and returns only once the
// pause has taken hold: every thread of the process is stopped.
//
// kill(2) with SIGSTOP returns as soon as the signal is queued, before the
// process stops. Stopping is a group stop (Linux kernel/signal.c:
// complete_signal wakes one thread; do_signal_stop, run by that thread once
// it gets a CPU, stops it and tells the others to stop): until then the
// other threads run on. For a Go program (ticketd) those are the network
// poller, the Raft log's fsync, the senders: on a loaded machine they have
// milliseconds in which a "stopped" follower receives an append, syncs it
// and acknowledges it, so a leader commits a write the test expected to
// block. Stop closes that window by waiting for every thread.
package procstop

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Within bounds how long Stop waits for every thread to stop. A thread
// stops as soon as it is scheduled, or when the system call it is in
// returns (an fsync): milliseconds even on a loaded machine. The bound is
// generous so that only a process that cannot be stopped at all (traced,
// or stuck in the kernel) trips it.
const Within = 10 * time.Second

// Stop sends SIGSTOP to p and returns once no thread of p runs: every one
// is stopped (or p has exited, which stops it too). When some thread is
// still running after Within, Stop sends SIGCONT, so that p is not left
// half stopped, and returns an error naming p's pid and those threads.
//
// Only Linux shows the state of each thread (/proc/<pid>/task); elsewhere
// Stop returns once the signal is sent.
func Stop(p *os.Process) error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return nil
		}
		return fmt.Errorf("procstop: SIGSTOP to pid %d: %w", p.Pid, err)
	}
	if err := WaitStopped(p.Pid, Within); err != nil {
		_ = p.Signal(syscall.SIGCONT)
		return err
	}
	return nil
}
