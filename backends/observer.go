package backends

import "time"

// Observer receives timings of a node's storage work, for metrics (issue
// 19: log append latency, snapshot count, duration and size). Both backends
// call it; Config.Observer nil means none. Its methods are called from
// backend goroutines, on the write path: they must be cheap and must not
// block (a Prometheus histogram observation is).
type Observer interface {
	// LogAppended reports one durable append to the Raft log: entries
	// entries written in one synced badger transaction (one fsync; etcd:
	// one Ready's Save, hashicorp: one StoreLogs) that took d, watermark
	// included.
	LogAppended(entries int, d time.Duration)
	// SnapshotTaken reports a snapshot of the state machine written by this
	// node (not one received from the leader): bytes long, taking d.
	SnapshotTaken(bytes int64, d time.Duration)
	// Proposed reports a Propose that succeeded: d from the call to the
	// command's local apply (queueing, the log append, replication to a
	// majority, commit and apply; Raft thesis §10.2's commit latency plus
	// the apply).
	Proposed(d time.Duration)
	// Applied reports one batch of committed entries applied to the state
	// machine (OnApply hooks included), entries long, taking d.
	Applied(entries int, d time.Duration)
}
