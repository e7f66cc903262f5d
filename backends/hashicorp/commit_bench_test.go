package hashicorp_test

import (
	"testing"

	"github.com/ticketd/ticketd/backends/backendtest"
)

// BenchmarkCommit measures commit latency and throughput of a 3-node loopback
// cluster of this backend with badger on disk: backendtest.BenchmarkCommit,
// the harness both backends share, so their figures compare directly.
func BenchmarkCommit(b *testing.B) {
	backendtest.BenchmarkCommit(b, newNode)
}
