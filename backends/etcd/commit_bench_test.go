package etcd_test

import (
	"testing"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
)

// BenchmarkCommit measures commit latency and throughput of a 3-node loopback
// cluster of this backend on disk, once per log store ("store=badger",
// "store=wal"): backendtest.BenchmarkCommit, the harness both backends
// share, so their figures compare directly.
func BenchmarkCommit(b *testing.B) {
	for _, store := range backends.LogStores() {
		b.Run("store="+store, func(b *testing.B) {
			backendtest.BenchmarkCommit(b, backendtest.WithLogStore(newNode, store))
		})
	}
}
