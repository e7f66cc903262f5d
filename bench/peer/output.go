package peer

import (
	"time"

	"github.com/ticketd/ticketd/bench/load"
)

// Output is what bench/etcdpeer prints on stdout as one JSON object.
type Output struct {
	// System is report.SystemEtcdMutex ("etcd-mutex") or, for the
	// keepalive workload, report.SystemEtcdKeepAlive ("etcd-keepalive").
	System string `json:"system"`
	// EtcdVersion is the embedded etcd server's version.
	EtcdVersion string `json:"etcd_version"`
	// Results holds one measurement per concurrency level, in the order asked.
	Results []load.Result `json:"results"`
	// CPU is the user+system CPU time the peer process and the client
	// processes it started used over its whole run, set by Run from the
	// exited process (not part of the JSON).
	CPU time.Duration `json:"-"`
}

// ProgressPrefix starts each line bench/etcdpeer writes on stderr when it
// begins a concurrency level: "etcdpeer: concurrency N".
const ProgressPrefix = "etcdpeer: concurrency "
