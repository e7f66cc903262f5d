package ticketdtest

import "syscall"

// procAttr kills a node if the test process dies without cleaning up.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
