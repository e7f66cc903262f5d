package server

import (
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ticketd/ticketd/backends"
)

// peerStaleAfter is how long a follower's series stays exported after the
// backend's last FollowerProgress report for it (backends report about once
// a second): a member removed from the configuration, or a report that
// raced a leadership loss, stops being exported after this long.
const peerStaleAfter = 5 * time.Second

// maxPeerLabels bounds the distinct peer label values of
// ticketd_peer_transport_errors_total: a transport names an unidentified
// peer by its remote address, and strangers choose those. Further values
// are counted under peer="other".
const maxPeerLabels = 64

// transportErrorKinds are the kinds backends.PeerObserver names; their
// children exist from the start for every configured peer, so rate() sees
// the first error.
var transportErrorKinds = []string{"dial", "handshake", "read", "write", "oversize", "refused", "identity"}

// peerMetrics is the leader's view of each follower and the peer
// transports' failures: the backends.PeerObserver half of
// clusterMetrics. Its methods are safe for concurrent use and never block
// for long (one mutex, no I/O).
type peerMetrics struct {
	isLeader func() bool // the node is the promoted leader (scrape gate)
	now      func() time.Time

	lagDesc, contactDesc *prometheus.Desc
	errors               *prometheus.CounterVec

	// ids maps a configured member's raft address to its id: the
	// transports name a peer by address, and an alert wants the member.
	ids map[string]string

	mu        sync.Mutex
	followers map[string]*followerState
	errPeers  map[string]bool // peer label values in use by errors
}

// followerState is what the last FollowerProgress said about one follower.
type followerState struct {
	lag      uint64
	contact  time.Time // last response from it; zero: none yet
	first    time.Time // first report in this leadership
	reported time.Time // last report
}

var _ backends.PeerObserver = (*clusterMetrics)(nil)

// newPeerMetrics returns the peer metrics; peers are the configured members
// other than this node, by id (their error children are created at 0), and
// ids maps their raft addresses to those ids.
func newPeerMetrics(isLeader func() bool, peers []string, ids map[string]string) *peerMetrics {
	pm := &peerMetrics{
		isLeader: isLeader,
		now:      time.Now,
		lagDesc: prometheus.NewDesc("ticketd_raft_follower_lag_entries",
			"On the leader only: log entries each follower is behind the leader's last index, as of the backend's last report (every 200 ms).",
			[]string{"peer"}, nil),
		contactDesc: prometheus.NewDesc("ticketd_raft_follower_last_contact_seconds",
			"On the leader only: seconds since the leader last had a response from each follower (since it became leader when none yet), computed at scrape.",
			[]string{"peer"}, nil),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ticketd", Name: "peer_transport_errors_total",
			Help: "Failures of the Raft peer transport, by peer (the member ID of a configured member's raft address, else the remote IP without its port; \"other\" past 64 distinct values) and kind (dial, handshake, read, write, oversize, refused, identity).",
		}, []string{"peer", "kind"}),
		ids:       ids,
		followers: map[string]*followerState{},
		errPeers:  map[string]bool{},
	}
	for _, p := range peers {
		pm.errPeers[p] = true
		for _, k := range transportErrorKinds {
			pm.errors.WithLabelValues(p, k)
		}
	}
	return pm
}

// followerProgress records a backend's report about one follower.
func (pm *peerMetrics) followerProgress(peer string, lag uint64, contact time.Time) {
	now := pm.now()
	pm.mu.Lock()
	defer pm.mu.Unlock()
	f, ok := pm.followers[peer]
	if !ok {
		f = &followerState{first: now}
		pm.followers[peer] = f
	}
	f.lag, f.contact, f.reported = lag, contact, now
}

// heardFrom reports whether the last FollowerProgress of peer, in this
// node's current leadership, carried a response from it (a follower that
// answered this leader has stored this term and, with the answer, the
// configuration it was sent).
func (pm *peerMetrics) heardFrom(peer string) bool {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	f, ok := pm.followers[peer]
	return ok && !f.contact.IsZero()
}

// peerLabel is the peer label of a transport's peer name: the member ID for
// a configured member's raft address (or an ID as given), else the host
// without its port, so that connections from one stranger's ephemeral
// ports count under one series an alert can see.
func (pm *peerMetrics) peerLabel(peer string) string {
	if id, ok := pm.ids[peer]; ok {
		return id
	}
	if host, _, err := net.SplitHostPort(peer); err == nil {
		return host
	}
	return peer
}

// transportError counts one peer transport failure.
func (pm *peerMetrics) transportError(peer, kind string) {
	peer = pm.peerLabel(peer)
	pm.mu.Lock()
	if !pm.errPeers[peer] {
		if len(pm.errPeers) >= maxPeerLabels {
			peer = "other"
		} else {
			pm.errPeers[peer] = true
		}
	}
	pm.mu.Unlock()
	pm.errors.WithLabelValues(peer, kind).Inc()
}

// reset forgets every follower: called when this node stops leading, so a
// follower never exports the lag it saw as an old leader.
func (pm *peerMetrics) reset() {
	pm.mu.Lock()
	clear(pm.followers)
	pm.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (pm *peerMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- pm.lagDesc
	ch <- pm.contactDesc
}

// Collect implements prometheus.Collector: one lag and one last-contact
// series per follower reported within peerStaleAfter, and none unless this
// node is the promoted leader.
func (pm *peerMetrics) Collect(ch chan<- prometheus.Metric) {
	if !pm.isLeader() {
		return
	}
	now := pm.now()
	pm.mu.Lock()
	defer pm.mu.Unlock()
	for peer, f := range pm.followers {
		if now.Sub(f.reported) > peerStaleAfter {
			delete(pm.followers, peer)
			continue
		}
		since := f.contact
		if since.IsZero() {
			since = f.first
		}
		ch <- prometheus.MustNewConstMetric(pm.lagDesc, prometheus.GaugeValue, float64(f.lag), peer)
		ch <- prometheus.MustNewConstMetric(pm.contactDesc, prometheus.GaugeValue, max(now.Sub(since).Seconds(), 0), peer)
	}
}

// FollowerProgress implements backends.PeerObserver.
func (cm *clusterMetrics) FollowerProgress(peer string, lagEntries uint64, lastContact time.Time) {
	cm.peers.followerProgress(peer, lagEntries, lastContact)
}

// PeerTransportError implements backends.PeerObserver.
func (cm *clusterMetrics) PeerTransportError(peer, kind string) {
	cm.peers.transportError(peer, kind)
}
