package hashicorp_test

import (
	"testing"

	"github.com/ticketd/ticketd/backends/backendtest"
)

// TestFollowerProgress: the leader reports each follower's lag and last
// contact to a backends.PeerObserver (progress.go).
func TestFollowerProgress(t *testing.T) {
	backendtest.RunFollowerProgress(t, newNode)
}
