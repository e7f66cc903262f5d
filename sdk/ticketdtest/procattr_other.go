//go:build !linux

package ticketdtest

import "syscall"

// procAttr: only Linux can tie a child's life to its parent.
func procAttr() *syscall.SysProcAttr { return nil }
