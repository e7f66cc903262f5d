package server_test

import (
	"bufio"
	"connectrpc.com/connect"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// peerSeries reads every sample of the family name from a node's /metrics,
// by its peer label.
func peerSeries(t *testing.T, in *nodetest.Instance, name string) map[string]float64 {
	t.Helper()
	res, err := http.Get("http://" + in.Addr + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name+`{peer="`)
		if !ok {
			continue
		}
		peer, val, ok := strings.Cut(rest, `"} `)
		require.True(t, ok, "unexpected labels: %s", sc.Text())
		f, err := strconv.ParseFloat(val, 64)
		require.NoError(t, err)
		out[peer] = f
	}
	require.NoError(t, sc.Err())
	return out
}

const (
	lagMetric     = "ticketd_raft_follower_lag_entries"
	contactMetric = "ticketd_raft_follower_last_contact_seconds"
)

// requireFollowerSeries waits until node li, the leader, exports a lag
// (settled at 0) and a last-contact series for each other node, and checks
// that the other nodes export none.
func requireFollowerSeries(t *testing.T, c *nodetest.Cluster, li int) {
	t.Helper()
	l := c.Nodes[li]
	require.Eventually(t, func() bool {
		lag, contact := peerSeries(t, l, lagMetric), peerSeries(t, l, contactMetric)
		for i, in := range c.Nodes {
			if i == li {
				continue
			}
			if v, ok := lag[in.ID]; !ok || v != 0 {
				return false
			}
			if _, ok := contact[in.ID]; !ok {
				return false
			}
		}
		return len(lag) == 2 && len(contact) == 2
	}, 15*time.Second, 100*time.Millisecond, "leader %s exports caught-up followers", l.ID)
	for i, in := range c.Nodes {
		if i == li {
			continue
		}
		require.Empty(t, peerSeries(t, in, lagMetric), "follower %s exports lag", in.ID)
		require.Empty(t, peerSeries(t, in, contactMetric), "follower %s exports last contact", in.ID)
	}
}

// TestFollowerProgressMetrics: on a real three-node cluster of each
// backend, the leader exports a lag and a last-contact series for each
// follower and the followers export none; writes replicate, so the lag
// settles at 0; after a leadership transfer the old leader exports none
// and the new one its own followers; once a follower is stopped, its
// last-contact age grows past the running follower's and its lag grows
// with new writes.
func TestFollowerProgressMetrics(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"hashicorp", "etcd"} {
		t.Run(backend, func(t *testing.T) {
			c := nodetest.Start(t, 3, nodetest.WithBackend(backend))
			ctx := context.Background()
			li := c.WaitLeader(t)
			_, err := c.Nodes[li].Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "progress", LeaseMs: 60_000})
			require.NoError(t, err)
			requireFollowerSeries(t, c, li)

			// Leadership moves: the old leader drops its series at once,
			// the new one exports its own followers.
			old := li
			next := c.Nodes[(li+1)%3]
			_, err = c.Nodes[li].Cluster.TransferLeader(ctx, &ticketv1.TransferLeaderRequest{Id: next.ID})
			require.NoError(t, err)
			li = c.WaitLeader(t)
			require.NotEqual(t, old, li)
			requireFollowerSeries(t, c, li)
			l := c.Nodes[li]

			stopped, running := -1, ""
			for i, in := range c.Nodes {
				switch {
				case i == li:
				case stopped < 0:
					stopped = i
				default:
					running = in.ID
				}
			}
			gone := c.Nodes[stopped].ID
			c.Stop(stopped)
			// With one follower stopped, a loaded machine may move
			// leadership between the two left: write through whichever
			// leads, and read the series of the leader at the end (it
			// exports both followers, the stopped one never or long ago
			// contacted).
			for i := 0; i < 5; {
				_, err := c.Nodes[c.WaitLeader(t)].Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "after-" + strconv.Itoa(i), LeaseMs: 60_000, Owner: "after-" + strconv.Itoa(i)})
				if connect.CodeOf(err) == connect.CodeUnavailable {
					continue
				}
				require.NoError(t, err)
				i++
			}
			require.Eventually(t, func() bool {
				l = c.Nodes[c.WaitLeader(t)]
				contact, lag := peerSeries(t, l, contactMetric), peerSeries(t, l, lagMetric)
				return contact[gone] > contact[running]+1.5 && lag[gone] >= 5 && lag[running] == 0
			}, 20*time.Second, 200*time.Millisecond, "stopped follower's last contact ages and its lag grows")
			first := peerSeries(t, l, contactMetric)[gone]
			require.Eventually(t, func() bool {
				return peerSeries(t, l, contactMetric)[gone] > first
			}, 10*time.Second, 200*time.Millisecond, "the age keeps growing")
		})
	}
}
