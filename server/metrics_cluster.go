package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
)

// Version is this build's version, exported as ticketd_build_info{version};
// cmd/ticketd sets it from its -ldflags version at start.
var Version = "dev"

// clusterMetrics are the Raft-level metrics an operator alerts on
// (docs/operations.md#health-and-monitoring): term, commit and apply position,
// replay, leader changes, proposal (propose → commit → apply) and apply
// latency, log append (fsync) latency, snapshots, build info, follower lag and
// last contact, peer transport errors. It is the backend's backends.Observer
// and backends.PeerObserver.
type clusterMetrics struct {
	// leaderChanges counts leadership changes this node saw
	// (OnLeaderChange events).
	leaderChanges prometheus.Counter
	// logAppend times durable Raft log appends (one fsync each);
	// appendEntries counts the entries they wrote.
	logAppend     prometheus.Observer
	appendEntries prometheus.Counter
	// snapshots, snapshotDuration and snapshotBytes describe the snapshots
	// this node took.
	snapshots        prometheus.Counter
	snapshotDuration prometheus.Observer
	snapshotBytes    prometheus.Gauge
	// proposal times Proposes from call to local apply; apply times
	// batches of committed entries applied.
	proposal prometheus.Observer
	apply    prometheus.Observer
	// peers is the leader's view of each follower and the peer transport
	// errors (metrics_peers.go).
	peers *peerMetrics
}

// Proposed implements backends.Observer.
func (cm *clusterMetrics) Proposed(d time.Duration) { cm.proposal.Observe(d.Seconds()) }

// Applied implements backends.Observer.
func (cm *clusterMetrics) Applied(_ int, d time.Duration) { cm.apply.Observe(d.Seconds()) }

var _ backends.Observer = (*clusterMetrics)(nil)

// LogAppended implements backends.Observer.
func (cm *clusterMetrics) LogAppended(entries int, d time.Duration) {
	cm.logAppend.Observe(d.Seconds())
	cm.appendEntries.Add(float64(entries))
}

// SnapshotTaken implements backends.Observer.
func (cm *clusterMetrics) SnapshotTaken(bytes int64, d time.Duration) {
	cm.snapshots.Inc()
	cm.snapshotDuration.Observe(d.Seconds())
	cm.snapshotBytes.Set(float64(bytes))
}

// newClusterMetrics returns the cluster metrics of n and the collectors to
// register. The gauges read n.raft.Status() on scrape (0 until the backend
// has started).
func newClusterMetrics(n *Node) (*clusterMetrics, []prometheus.Collector) {
	logAppend := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "ticketd", Name: "log_append_duration_seconds",
		Help:    "Durable Raft log appends (one synced write, the fsync included) in seconds, as etcd's etcd_disk_wal_fsync_duration_seconds.",
		Buckets: []float64{.0001, .0002, .0005, .001, .002, .004, .008, .016, .032, .064, .128, .256, .512, 1.024, 2.048},
	})
	snapDuration := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "ticketd", Name: "snapshot_duration_seconds",
		Help:    "Snapshots of the lock table taken by this node, in seconds.",
		Buckets: prometheus.ExponentialBuckets(.001, 4, 10),
	})
	latency := []float64{.0001, .0002, .0005, .001, .002, .004, .008, .016, .032, .064, .128, .256, .512, 1.024, 2.048}
	proposal := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "ticketd", Name: "proposal_duration_seconds",
		Help:    "Successful Raft proposals from submission to local apply (append, replication to a majority, commit, apply), in seconds; leader only.",
		Buckets: latency,
	})
	apply := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "ticketd", Name: "apply_duration_seconds",
		Help:    "Batches of committed entries applied to the lock table, in seconds.",
		Buckets: latency,
	})
	var peers []string
	ids := map[string]string{}
	for _, m := range n.cfg.Members() {
		if m.ID != n.cfg.ID {
			peers = append(peers, m.ID)
			ids[m.RaftAddr] = m.ID
		}
	}
	cm := &clusterMetrics{
		peers:    newPeerMetrics(n.isPromoted, peers, ids),
		proposal: proposal,
		apply:    apply,
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "ticketd", Name: "leader_changes_total",
			Help: "Leadership changes seen by this node (a new leader, or none), as etcd's etcd_server_leader_changes_seen_total.",
		}),
		logAppend: logAppend,
		appendEntries: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "ticketd", Name: "log_appended_entries_total",
			Help: "Raft log entries this node appended durably.",
		}),
		snapshots: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "ticketd", Name: "snapshots_total",
			Help: "Snapshots of the lock table this node took (then compacting its log).",
		}),
		snapshotDuration: snapDuration,
		snapshotBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "ticketd", Name: "snapshot_size_bytes",
			Help: "Size in bytes of the last snapshot this node took.",
		}),
	}
	status := func(fn func(st core.Status) float64) func() float64 {
		return func() float64 {
			select {
			case <-n.ready:
				return fn(n.raft.Status())
			default:
				return 0
			}
		}
	}
	gauge := func(name, help string, fn func(st core.Status) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "ticketd", Name: name, Help: help}, status(fn))
	}
	cs := []prometheus.Collector{
		cm.peers, cm.peers.errors,
		cm.leaderChanges, logAppend, cm.appendEntries, cm.snapshots, snapDuration, cm.snapshotBytes, proposal, apply,
		gauge("term", "Current Raft term of this node.", func(st core.Status) float64 { return float64(st.Term) }),
		gauge("commit_index", "Highest Raft log index this node knows committed.", func(st core.Status) float64 { return float64(st.CommitIndex) }),
		gauge("apply_lag_entries", "Committed entries this node has not applied yet (commit_index - applied_index).",
			func(st core.Status) float64 {
				return float64(st.CommitIndex) - float64(min(st.AppliedIndex, st.CommitIndex))
			}),
		gauge("has_leader", "1 when this node knows a leader.", func(st core.Status) float64 { return b2f(st.Leader.ID != "") }),
		gauge("replaying", "1 while this node replays its log after a restart (stale reads refused).",
			func(st core.Status) float64 { return b2f(st.AppliedIndex < st.RecoveredCommitIndex) }),
		gauge("members", "Members in this node's Raft configuration.", func(st core.Status) float64 { return float64(len(st.Members)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "ticketd", Name: "build_info",
			Help:        "Always 1; the labels name this binary's version and the configured consensus backend.",
			ConstLabels: prometheus.Labels{"version": Version, "backend": n.cfg.Backend},
		}, func() float64 { return 1 }),
	}
	return cm, cs
}

// countLeaderChanges wraps a backend's OnLeaderChange hook so that every
// event is counted before next handles it; an event saying this node does
// not lead drops its per-follower series.
func (cm *clusterMetrics) countLeaderChanges(next func(core.LeaderEvent)) func(core.LeaderEvent) {
	return func(ev core.LeaderEvent) {
		cm.leaderChanges.Inc()
		if !ev.IsLeader {
			cm.peers.reset()
		}
		next(ev)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
