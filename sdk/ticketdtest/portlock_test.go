//go:build unix

package ticketdtest

import "testing"

// TestReservePortHeldElsewhereIsRefused: a port claimed once cannot be
// claimed again through another open file (as another test process would
// try: flock(2) locks conflict between open file descriptions, in one
// process or two), and the first claim still holds.
func TestReservePortHeldElsewhereIsRefused(t *testing.T) {
	const port = 32760 // in the picked range; a claim left by a finished process is free again
	if !reservePort(port) {
		t.Skip("port 32760 is claimed by another running test process")
	}
	if reservePort(port) {
		t.Fatal("a claimed port was claimed again")
	}
}
