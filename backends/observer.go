package backends

import "time"

// Observer receives timings of a node's storage work, for metrics (log
// append latency, snapshot count, duration and size). Both backends
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

// PeerObserver is implemented by an Observer that also wants the peer
// transport's failures and the leader's view of each follower (peer
// transport errors, follower lag and last contact per peer). Both
// backends check Config.Observer for it with a type assertion; its methods
// have Observer's contract (cheap, never block, any goroutine).
type PeerObserver interface {
	// PeerTransportError counts one failure talking to peer (its member ID,
	// or its remote address when the peer is not yet identified) of kind:
	// "dial", "handshake" (TLS refused either way), "read" (an idle or
	// message read deadline that passed included), "write", "oversize" (a
	// declared message longer than the configured maximum, or past the etcd
	// receive budget), "refused" (an accepted connection closed at once
	// because Config.MaxPeerConns or MaxPeerConnsPerIP was reached) or
	// "identity" (over mutual TLS, a message claiming another member than
	// the one the peer certificate names, or sent under the certificate of
	// a member removed since its connection opened; a certificate naming
	// no current member is refused at the handshake, "handshake").
	PeerTransportError(peer, kind string)
	// FollowerProgress reports, on the leader only, one follower's
	// replication state: lag in log entries behind the leader's last index
	// (0 when caught up) and the time of the last successful response from
	// it (zero time: none since this node became leader).
	FollowerProgress(peer string, lagEntries uint64, lastContact time.Time)
}

// PeerErrorCounter returns obs's PeerTransportError when obs implements
// PeerObserver, nil otherwise (a nil Observer included): both backends'
// transports call the result, when non-nil, for each failure they count.
func PeerErrorCounter(obs Observer) func(peer, kind string) {
	if po, ok := obs.(PeerObserver); ok {
		return po.PeerTransportError
	}
	return nil
}
