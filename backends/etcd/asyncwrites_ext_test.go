package etcd_test

import (
	"testing"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/backends/etcd"
)

// newAsyncNode is newNode with Config.AsyncStorageWrites: the log written
// by the append thread (asyncwrites.go).
func newAsyncNode(cfg backends.Config) (backendtest.Node, error) {
	cfg.AsyncStorageWrites = true
	return etcd.New(cfg)
}

// TestAsyncStorageWrites runs the conformance suite and the crash
// recovery cases on every log store with AsyncStorageWrites.
func TestAsyncStorageWrites(t *testing.T) {
	backendtest.ForEachLogStore(t, newAsyncNode, etcd.Restore, func(t *testing.T, open backendtest.Factory, restore backends.RestoreFunc) {
		t.Run("conformance", func(t *testing.T) { backendtest.Run(t, open) })
		t.Run("recovery", func(t *testing.T) { backendtest.RunRecovery(t, open, restore) })
	})
}

// BenchmarkCommitAsyncWrites is BenchmarkCommit with AsyncStorageWrites,
// once per log store: the two compare directly.
func BenchmarkCommitAsyncWrites(b *testing.B) {
	for _, store := range backends.LogStores() {
		b.Run("store="+store, func(b *testing.B) {
			backendtest.BenchmarkCommit(b, backendtest.WithLogStore(newAsyncNode, store))
		})
	}
}
