//go:build !unix

package main

import (
	"errors"
	"os"
)

var errNoStop = errors.New("stopping a process needs SIGSTOP (unix only)")

func pause(p *os.Process) error  { return errNoStop }
func resume(p *os.Process) error { return errNoStop }
