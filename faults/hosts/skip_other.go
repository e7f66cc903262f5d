//go:build !linux

package hosts

import "testing"

// Skip skips t: network namespaces exist only on Linux.
func Skip(t testing.TB) {
	t.Helper()
	t.Skip("host tests skipped: network namespaces need Linux")
}
