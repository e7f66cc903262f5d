package loopback_test

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/loopback"
)

func TestFreeAddrs(t *testing.T) {
	addrs, err := loopback.FreeAddrs(5)
	require.NoError(t, err)
	require.Len(t, addrs, 5)
	seen := map[string]bool{}
	for _, a := range addrs {
		require.False(t, seen[a], "duplicate %s", a)
		seen[a] = true
		host, _, err := net.SplitHostPort(a)
		require.NoError(t, err)
		require.Equal(t, "127.0.0.1", host)
		ln, err := net.Listen("tcp", a) // released: bindable again
		require.NoError(t, err)
		ln.Close()
	}
}
