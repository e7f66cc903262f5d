//go:build linux

package hosts

import "testing"

// Skip skips t, saying why, when this machine cannot create network
// namespaces (not root, or no `ip`); CI runs as root, so there the host
// tests run.
func Skip(t testing.TB) {
	t.Helper()
	if err := supported(); err != nil {
		t.Skipf("host tests skipped: %v", err)
	}
}
