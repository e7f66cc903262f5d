package main

import (
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// This file is the process group that "lock run", "elect" and "session run"
// start their command in: the command and everything it starts (a shell's
// children, a pipeline) share one process group, so ending the hold ends
// all of them, not only the direct child (consul lock signals only its
// child; etcdctl lock's exec does the same, which leaves a `sh -c` job's
// grandchildren running without the lock). A process that leaves the group
// on purpose (setsid, setpgid) escapes, as it escapes a shell's job
// control.

// groupPoll is how often stopGroup looks whether the group is gone after
// the direct child exited (kill(-pgid, 0) answers ESRCH then).
const groupPoll = 50 * time.Millisecond

// startGroup starts child as the leader of a new process group (its pgid is
// its pid), ticketctl having become the reaper of its orphaned descendants
// where the system allows it (becomeSubreaper), so that what the child
// leaves behind is reaped here and seen gone. When ticketctl runs in the
// foreground of a terminal (its stdin), the child's group is made the
// terminal's foreground group, as a shell does for a job, so that the child
// can read the terminal (a background group reading it would be stopped by
// SIGTTIN) and gets Ctrl-C from it; the returned release gives the terminal
// back to ticketctl and must be called once the child has exited. It does
// nothing otherwise.
func startGroup(child *exec.Cmd) (release func(), err error) {
	becomeSubreaper()
	if child.SysProcAttr == nil {
		child.SysProcAttr = &syscall.SysProcAttr{}
	}
	child.SysProcAttr.Setpgid = true
	tty, fg := foregroundTerminal()
	if fg {
		// Foreground: the forked child makes its group the terminal's
		// foreground group (tcsetpgrp on Ctty, the parent's fd) before exec.
		child.SysProcAttr.Foreground, child.SysProcAttr.Ctty = true, tty
	}
	err = child.Start()
	if !fg {
		return func() {}, err
	}
	// Even a failed exec may have taken the terminal: always give it back.
	return func() { takeTerminal(tty) }, err
}

// signalGroup sends sig to every process of the group led by pid. A group
// already gone (ESRCH) is not an error.
func signalGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// terminateGroup sends SIGTERM to the group led by pid, then SIGCONT, so
// that a member stopped by job control (SIGTTIN, SIGTSTP) acts on it, as a
// shell's kill of a stopped job does.
func terminateGroup(pid int) {
	_ = signalGroup(pid, syscall.SIGTERM)
	_ = signalGroup(pid, syscall.SIGCONT)
}

// groupAlive reports whether any process of the group led by pid remains
// (a zombie not yet reaped counts: its parent is still in the group).
func groupAlive(pid int) bool {
	return syscall.Kill(-pid, 0) == nil
}

// reapGroup waits until the group led by pid (whose leader has exited and
// been reaped) is empty: the processes left get SIGTERM at once, SIGKILL
// after killTimeout, and then up to killTimeout more to be reaped by
// whoever inherited them (init or a subreaper). It reports whether the
// group is gone; false means a process ignored even SIGKILL's delivery
// (stuck in the kernel) or its new parent does not reap it.
func reapGroup(pid int, killTimeout time.Duration, notify func(sig syscall.Signal)) bool {
	reapOrphans(pid)
	if !groupAlive(pid) {
		return true
	}
	notify(syscall.SIGTERM)
	terminateGroup(pid)
	if waitGroupGone(pid, killTimeout) {
		return true
	}
	notify(syscall.SIGKILL)
	_ = signalGroup(pid, syscall.SIGKILL)
	return waitGroupGone(pid, killTimeout)
}

// waitGroupGone polls every groupPoll until the group led by pid is empty
// or d has passed, and reports whether it is empty.
func waitGroupGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for reapOrphans(pid); groupAlive(pid); reapOrphans(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(groupPoll)
	}
	return true
}
