package backendtest

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFreeAddrBelowEphemeralRange: FreeAddr hands out distinct loopback
// ports below the ephemeral range, which outgoing connections never take
// as their source port, and each is free to bind.
func TestFreeAddrBelowEphemeralRange(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		addr := FreeAddr(t)
		assert.False(t, seen[addr], "handed out twice: %s", addr)
		seen[addr] = true
		host, port, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		assert.Equal(t, "127.0.0.1", host)
		p, err := strconv.Atoi(port)
		require.NoError(t, err)
		assert.Less(t, p, 32768, "an ephemeral port (Linux's default range starts at 32768)")
		l, err := net.Listen("tcp", addr)
		require.NoError(t, err, "bind %s", addr)
		require.NoError(t, l.Close())
	}
}
