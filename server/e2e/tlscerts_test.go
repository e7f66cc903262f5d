package e2e_test

import (
	"fmt"
	"testing"

	"github.com/ticketd/ticketd/server/security/securitytest"
)

// makeCerts writes, into a temp dir, what `ticketctl cert` makes for a
// cluster of n nodes on loopback (node ids n1..nN) and client certificates
// for names. It returns the dir.
func makeCerts(t *testing.T, n int, names ...string) string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("n%d", i+1)
	}
	return securitytest.Certs(t, ids, names...)
}
