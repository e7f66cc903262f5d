package etcd_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/backends/etcd"
)

func TestMain(m *testing.M) {
	// badger.Open's leftovers after a refused start (also
	// TestBadgerFileDamageIsRefused).
	goleak.VerifyTestMain(m, backendtest.FailedOpenLeaks()...)
}

// forEachStore runs fn once per log store (backendtest.ForEachLogStore).
func forEachStore(t *testing.T, fn func(t *testing.T, open backendtest.Factory, restore backends.RestoreFunc)) {
	backendtest.ForEachLogStore(t, newNode, etcd.Restore, fn)
}

func TestConformance(t *testing.T) {
	forEachStore(t, func(t *testing.T, open backendtest.Factory, _ backends.RestoreFunc) { backendtest.Run(t, open) })
}

// newNode is the backendtest.Factory of this backend.
func newNode(cfg backends.Config) (backendtest.Node, error) { return etcd.New(cfg) }

func TestPeerTLS(t *testing.T) {
	backendtest.RunPeerTLS(t, newNode)
}

func TestRecovery(t *testing.T) {
	forEachStore(t, backendtest.RunRecovery)
}

// TestSingleNodeConformance runs the conformance cases that hold for a
// one-member group (backendtest.RunSingleNode), which memraft runs too.
func TestSingleNodeConformance(t *testing.T) {
	backendtest.RunSingleNode(t, newNode)
}
