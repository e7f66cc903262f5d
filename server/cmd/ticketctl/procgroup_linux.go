package main

import "syscall"

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER (linux/prctl.h,
// Linux 3.4).
const prSetChildSubreaper = 36

// becomeSubreaper makes ticketctl the parent of every orphaned descendant
// (prctl(2) PR_SET_CHILD_SUBREAPER, as systemd and tini use it): a process
// left by a command that exited is reparented to ticketctl instead of init,
// which in a container may never reap it, so reapOrphans can collect it and
// the group is seen gone. Failure leaves the default (init reaps them).
func becomeSubreaper() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}

// reapOrphans collects, without blocking, every exited child of ticketctl
// in process group pgid: the orphans becomeSubreaper made ours. It must run
// only after the group's leader was reaped by its own Wait, which it would
// otherwise race.
func reapOrphans(pgid int) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
