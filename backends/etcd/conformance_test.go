package etcd_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/backends/etcd"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// badger.Open leaves these two behind when it fails on damaged
		// tables (TestBadgerFileDamageIsRefused); a DB leaked by this
		// package would still show its many other goroutines.
		goleak.IgnoreTopFunction("github.com/dgraph-io/ristretto/v2/z.(*AllocatorPool).freeupAllocators"),
		goleak.IgnoreTopFunction("github.com/dgraph-io/badger/v4.(*DB).monitorCache"),
	)
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, newNode)
}

// newNode is the backendtest.Factory of this backend.
func newNode(cfg backends.Config) (backendtest.Node, error) { return etcd.New(cfg) }

func TestPeerTLS(t *testing.T) {
	backendtest.RunPeerTLS(t, newNode)
}

func TestRecovery(t *testing.T) {
	backendtest.RunRecovery(t, newNode, etcd.Restore)
}
