package main

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

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

// foregroundTerminal returns the fd of ticketctl's stdin and true when it
// is a terminal whose foreground process group is ticketctl's own (not when
// ticketctl was started in the background, or without a terminal).
func foregroundTerminal() (int, bool) {
	fd := int(os.Stdin.Fd())
	var pgrp int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp))); e != 0 {
		return 0, false
	}
	return fd, int(pgrp) == syscall.Getpgrp()
}

// takeTerminal makes ticketctl's process group the foreground group of
// terminal fd again (tcsetpgrp(3)). A background group that does so is
// sent SIGTTOU, which is ignored for the call, as shells do.
func takeTerminal(fd int) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	pgrp := int32(syscall.Getpgrp())
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&pgrp)))
}
