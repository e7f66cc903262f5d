package memraft_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/server/internal/memraft"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestSingleNodeConformance holds memraft, the in-memory stand-in the
// server's interaction harness steps, to the part of the backend contract
// that a group of one voter can keep: the same checks both real backends
// pass (backendtest.RunSingleNode lists them, and why the rest needs other
// voters or a disk; docs/design.md#the-consensus-contract).
func TestSingleNodeConformance(t *testing.T) {
	backendtest.RunSingleNode(t, func(cfg backends.Config) (backendtest.Node, error) { return memraft.New(cfg) })
}
