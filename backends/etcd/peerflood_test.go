package etcd_test

import (
	"testing"

	"github.com/ticketd/ticketd/backends/backendtest"
)

// TestPeerFlood: idle connections to a follower's peer port are capped and
// closed, and the cluster goes on (backendtest.RunPeerFlood).
func TestPeerFlood(t *testing.T) { backendtest.RunPeerFlood(t, newNode, backendtest.HTTP2Hello) }
