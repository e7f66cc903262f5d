package server_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves goroutines behind: nodes, lessors,
// queues, forwarders and background proposals all stop on Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
