package server_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves goroutines behind: nodes, lessors,
// queues, forwarders and background proposals all stop on Close.
//
// Every test that starts nodes of its own (own listeners, ports and data
// dirs) runs in parallel with the others (t.Parallel; go test's -parallel,
// by default the number of CPUs, bounds how many at once): most of their
// time is spent waiting on leases, elections and restarts. The tests that
// read the whole process's goroutines (the interaction harness waits until
// every goroutine is blocked; the stream-limit tests look for handler
// goroutines) do not call t.Parallel, so they run first, alone: go test
// starts the parallel tests once every other test has finished.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
