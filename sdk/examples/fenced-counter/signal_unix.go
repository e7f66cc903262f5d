//go:build unix

package main

import (
	"os"
	"syscall"
)

// pause stops process p (SIGSTOP): it and all its goroutines, lease
// renewals included, stand still until resume.
func pause(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }

// resume continues a stopped process (SIGCONT).
func resume(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
