package etcd_test

import (
	"fmt"
	"testing"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/backends/etcd/internal/hoptrace"
)

// BenchmarkCommitHops is BenchmarkCommit on the wal store with package
// hoptrace's timeline of each commit's hops logged at the end:
//
//	HOPTRACE=1 go test -run X -bench 'BenchmarkCommitHops/proposers=1$' -benchtime 2000x -v ./backends/etcd
//
// Without HOPTRACE it is BenchmarkCommit's wal half.
func BenchmarkCommitHops(b *testing.B) {
	hoptrace.Reset()
	backendtest.BenchmarkCommit(b, backendtest.WithLogStore(newNode, backends.LogStoreWAL))
	if hoptrace.On {
		// Printed, not logged: a parent benchmark's log is not shown.
		fmt.Print(hoptrace.Report())
	}
}
