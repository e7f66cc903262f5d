package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// fakeClock is a settable time for peerMetrics.now.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTestPeerMetrics(leader *bool, peers ...string) (*peerMetrics, *fakeClock, *prometheus.Registry) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	ids := map[string]string{}
	for i, p := range peers {
		ids[fmt.Sprintf("192.0.2.%d:7101", i+1)] = p
	}
	pm := newPeerMetrics(func() bool { return *leader }, peers, ids)
	pm.now = clk.now
	reg := prometheus.NewRegistry()
	reg.MustRegister(pm, pm.errors)
	return pm, clk, reg
}

// series returns the value of family name for peer, and whether it exists.
func series(t *testing.T, reg *prometheus.Registry, name, peer string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "peer" && l.GetValue() == peer {
					if g := m.GetGauge(); g != nil {
						return g.GetValue(), true
					}
					return m.GetCounter().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// TestPeerMetricsFollowerSeries: contact age is computed at scrape (from
// the first report while none), series are exported only on the leader,
// dropped on reset and once a follower is no longer reported.
func TestPeerMetricsFollowerSeries(t *testing.T) {
	t.Parallel()
	leader := true
	pm, clk, reg := newTestPeerMetrics(&leader)
	const lag, contact = "ticketd_raft_follower_lag_entries", "ticketd_raft_follower_last_contact_seconds"

	pm.followerProgress("n2", 7, time.Time{}) // no response yet
	clk.t = clk.t.Add(3 * time.Second)
	v, ok := series(t, reg, contact, "n2")
	require.True(t, ok)
	require.Equal(t, 3.0, v, "age counts from the first report while there is no contact")
	v, _ = series(t, reg, lag, "n2")
	require.Equal(t, 7.0, v)

	pm.followerProgress("n2", 0, clk.t.Add(-time.Second))
	clk.t = clk.t.Add(2 * time.Second)
	v, _ = series(t, reg, contact, "n2")
	require.Equal(t, 3.0, v, "age since the last contact")

	leader = false
	_, ok = series(t, reg, lag, "n2")
	require.False(t, ok, "exported on a node that is not the promoted leader")
	leader = true
	_, ok = series(t, reg, lag, "n2")
	require.True(t, ok)

	clk.t = clk.t.Add(peerStaleAfter + time.Second)
	_, ok = series(t, reg, lag, "n2")
	require.False(t, ok, "a follower no longer reported is still exported")

	pm.followerProgress("n3", 0, clk.t)
	pm.reset()
	_, ok = series(t, reg, lag, "n3")
	require.False(t, ok, "reset kept a series")
}

// TestPeerMetricsTransportErrors: configured peers have every kind at 0
// from the start; distinct unknown peers past maxPeerLabels count as
// "other".
func TestPeerMetricsTransportErrors(t *testing.T) {
	t.Parallel()
	leader := true
	pm, _, reg := newTestPeerMetrics(&leader, "n2", "n3")
	const name = "ticketd_peer_transport_errors_total"
	mfs, err := reg.Gather()
	require.NoError(t, err)
	count := 0
	for _, mf := range mfs {
		if mf.GetName() == name {
			count = len(mf.GetMetric())
		}
	}
	require.Equal(t, 2*len(transportErrorKinds), count)

	pm.transportError("n2", "dial")
	pm.transportError("n2", "dial")
	require.Equal(t, 2.0, errorCount(t, reg, "n2", "dial"))

	for i := range maxPeerLabels {
		pm.transportError(fmt.Sprintf("10.0.0.%d:4000", i), "handshake")
	}
	_, ok := series(t, reg, name, "other")
	require.True(t, ok, "labels past the cap are not folded into other")
	require.Len(t, pm.errPeers, maxPeerLabels)
	pm.transportError("n3", "read") // a known peer keeps its own label
	require.Equal(t, 1.0, errorCount(t, reg, "n3", "read"))
	require.Equal(t, 0.0, errorCount(t, reg, "n3", "dial"))
}

// errorCount returns ticketd_peer_transport_errors_total{peer,kind}.
func errorCount(t *testing.T, reg *prometheus.Registry, peer, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "ticketd_peer_transport_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["peer"] == peer && labels["kind"] == kind {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series peer=%s kind=%s", peer, kind)
	return 0
}

// TestPeerMetricsLabelByMember checks that the transports' addresses become
// member IDs, and that a stranger's connections from many ephemeral ports
// count under its IP alone, where an alert sees them (found by a new user:
// a refused certificate reconnecting from new ports was one series each).
func TestPeerMetricsLabelByMember(t *testing.T) {
	t.Parallel()
	leader := true
	pm, _, reg := newTestPeerMetrics(&leader, "n2", "n3")
	pm.transportError("192.0.2.1:7101", "dial") // n2's raft address
	require.Equal(t, 1.0, errorCount(t, reg, "n2", "dial"))
	for port := range 100 {
		pm.transportError(fmt.Sprintf("198.51.100.7:%d", 40000+port), "handshake")
	}
	require.Equal(t, 100.0, errorCount(t, reg, "198.51.100.7", "handshake"))
	require.Len(t, pm.errPeers, 3, "one label per stranger, not per port")
}
