//go:build !unix

package backendtest

// reservePort claims nothing where flock(2) is not available; the listen
// check alone applies there.
func reservePort(int) bool { return true }
