//go:build !linux

package main

// becomeSubreaper does nothing where prctl's PR_SET_CHILD_SUBREAPER does
// not exist: init reaps the orphans of a command's group.
func becomeSubreaper() {}

// reapOrphans does nothing: ticketctl is nobody's subreaper here.
func reapOrphans(int) {}
