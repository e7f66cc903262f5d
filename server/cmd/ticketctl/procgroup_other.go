//go:build !linux

package main

// becomeSubreaper does nothing where prctl's PR_SET_CHILD_SUBREAPER does
// not exist: init reaps the orphans of a command's group.
func becomeSubreaper() {}

// reapOrphans does nothing: ticketctl is nobody's subreaper here.
func reapOrphans(int) {}

// foregroundTerminal reports false: elsewhere the command's group runs in
// the background of the terminal (a read of it stops the command).
func foregroundTerminal() (int, bool) { return 0, false }

// takeTerminal does nothing (foregroundTerminal never hands it over).
func takeTerminal(int) {}
