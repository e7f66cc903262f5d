//go:build linux && faults

package hosts_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/faults/history"
	"github.com/ticketd/ticketd/faults/hosts"
)

// TestTLS runs a cluster with the production security flags (TLS with
// client certificates on the API, mutual TLS between peers, certificates
// for each node's own address) and checks that it elects, serves writes and
// reads through a follower (forwarding over mutual TLS), and survives a
// node moving to a new address with a certificate for it. It skips while
// the binary has no TLS flags.
func TestTLS(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		c := hosts.Start(t, hosts.Config{Backend: backend, Nodes: 3, TLS: true})
		r := newRecorder(c)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		write(t, r, "before")
		l := c.WaitLeader(t, time.Minute)
		f := follower(c, l)
		op := r.acquire(f, "through-follower", "f", 60_000)
		require.Equal(t, history.OK, op.Outcome, op.String())
		require.NoError(t, c.Move(ctx, f))
		write(t, r, "after-move")
		var other int
		for _, i := range c.Running() {
			if i != l && i != f {
				other = i
			}
		}
		require.NoError(t, c.Kill(other))
		write(t, r, "quorum-with-moved")
		g, _ := until(30*time.Second, func() history.Op { return r.get(f, "quorum-with-moved") })
		require.True(t, g.Outcome == history.OK && g.Held, "read through the moved node: %s", g)
		r.verify(t)
	})
}
