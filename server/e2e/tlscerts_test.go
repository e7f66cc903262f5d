package e2e_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/security"
)

// makeCerts writes, into a temp dir, what `ticketctl cert` makes for a
// cluster of n nodes on loopback: ca.crt/key, node-n<i>.crt/key for
// 127.0.0.1, and client certificates for names. It returns the dir.
func makeCerts(t *testing.T, n int, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	_, err := security.CreateCA(dir, time.Hour, false)
	require.NoError(t, err)
	for i := 1; i <= n; i++ {
		_, err := security.CreateNode(dir, "n"+string(rune('0'+i)), []string{"127.0.0.1", "localhost"}, time.Hour, false)
		require.NoError(t, err)
	}
	for _, name := range names {
		_, err := security.CreateClient(dir, name, time.Hour, false)
		require.NoError(t, err)
	}
	return dir
}
