//go:build linux

package hosts

import (
	"context"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// reach reports whether a TCP connection from namespace from to addr
// succeeds within a second, and echoes a byte through it.
func reach(t *testing.T, from *nsDialer, addr string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := from.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte{7}); err != nil {
		return false
	}
	b := make([]byte, 1)
	_, err = io.ReadFull(c, b)
	return err == nil && b[0] == 7
}

// reachSoon is reach, retried for up to 10s: a new link, or neighbour
// (ARP) entries that failed during a fault, take a moment on a loaded
// machine.
func reachSoon(t *testing.T, from *nsDialer, addr string) bool {
	t.Helper()
	for range 10 {
		if reach(t, from, addr) {
			return true
		}
	}
	return false
}

// echo serves one-byte echoes on addr inside host h until the test ends.
func echo(t *testing.T, h *Host, port string) string {
	t.Helper()
	d, err := newNSDialer(h.Name)
	require.NoError(t, err)
	t.Cleanup(d.Close)
	l, err := d.Listen("tcp", net.JoinHostPort(h.Addr(), port))
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.CopyN(c, c, 1) }()
		}
	}()
	return l.Addr().String()
}

// TestNetwork: hosts and the client reach each other over the bridge and
// nothing else; Block is one-way, Isolate spares the client, Down cuts
// everyone, Heal restores all, Readdress moves a host, and Close removes
// every namespace.
func TestNetwork(t *testing.T) {
	Skip(t)
	n, err := NewNetwork()
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	var hs []*Host
	for range 3 {
		h, err := n.AddHost()
		require.NoError(t, err)
		hs = append(hs, h)
	}
	dialers := make([]*nsDialer, len(hs))
	addrs := make([]string, len(hs))
	for i, h := range hs {
		dialers[i], err = newNSDialer(h.Name)
		require.NoError(t, err)
		t.Cleanup(dialers[i].Close)
		addrs[i] = echo(t, h, "9000")
	}
	client := n.dialer

	t.Run("all_paths_open", func(t *testing.T) {
		for i := range hs {
			require.True(t, reachSoon(t, client, addrs[i]), "client -> h%d", i)
			for j := range hs {
				require.True(t, reachSoon(t, dialers[i], addrs[j]), "h%d -> h%d", i, j)
			}
		}
	})
	t.Run("no_route_out", func(t *testing.T) {
		out, err := exec.Command("ip", "-n", hs[0].Name, "route", "show").Output()
		require.NoError(t, err)
		require.Equal(t, "10.213.0.0/24 dev eth0 proto kernel scope link src "+hs[0].Addr(), strings.TrimSpace(string(out)))
		require.False(t, reach(t, dialers[0], "192.0.2.1:80"))
	})
	t.Run("block_is_one_way", func(t *testing.T) {
		require.NoError(t, n.Block(hs[0], hs[1]))
		require.False(t, reach(t, dialers[0], addrs[1]))
		require.True(t, reach(t, dialers[0], addrs[2]))
		require.True(t, reach(t, client, addrs[0]))
		require.Equal(t, []string{"block h0->" + hs[1].Addr()}, n.Faults())
		require.NoError(t, n.Heal())
		require.True(t, reachSoon(t, dialers[0], addrs[1]))
	})
	t.Run("isolate_spares_clients", func(t *testing.T) {
		require.NoError(t, n.Isolate(hs[0], hs...))
		require.False(t, reach(t, dialers[0], addrs[1]))
		require.False(t, reach(t, dialers[2], addrs[0]))
		require.True(t, reach(t, dialers[1], addrs[2]))
		require.True(t, reach(t, client, addrs[0]))
		require.NoError(t, n.Heal())
		require.True(t, reachSoon(t, dialers[2], addrs[0]))
	})
	t.Run("down_cuts_everyone", func(t *testing.T) {
		require.NoError(t, n.Down(hs[2]))
		require.False(t, reach(t, client, addrs[2]))
		require.False(t, reach(t, dialers[0], addrs[2]))
		require.True(t, reach(t, client, addrs[1]))
		require.NoError(t, n.Heal())
		require.Empty(t, n.Faults())
		require.True(t, reachSoon(t, client, addrs[2]))
	})
	t.Run("readdress", func(t *testing.T) {
		old := hs[1].Addr()
		addr, err := n.Readdress(hs[1])
		require.NoError(t, err)
		require.NotEqual(t, old, addr)
		require.Equal(t, addr, hs[1].Addr())
		require.False(t, reach(t, client, addrs[1]))
		require.True(t, reachSoon(t, client, echo(t, hs[1], "9001")))
	})
	t.Run("close_removes_namespaces", func(t *testing.T) {
		names := []string{hs[0].Name, hs[1].Name, hs[2].Name, n.bridge, n.client.Name}
		require.NoError(t, n.Close())
		for _, name := range names {
			require.False(t, nsExists(name), name)
		}
	})
}
