package sdk_test

import (
	"sync"
	"testing"
)

// The examples run against fake clusters (fake_test.go: LockService and
// ClusterService over real HTTP/2 on loopback, one in-memory lock table),
// one fresh cluster per example, so that their output is the same on every
// run: fencing tokens start at 1, as on a new ticketd cluster.
var (
	examplesMu      sync.Mutex
	exampleClusters []*fakeCluster
)

// exampleCluster starts a fake cluster of n nodes, the first one leader,
// for an example, and returns its API addresses, as the endpoints of a
// real cluster are given to sdk.New ("127.0.0.1:7001", ... for `make
// run`). TestMain closes it when every test and example has run.
func exampleCluster(n int) []string {
	c := startFakeCluster(n)
	examplesMu.Lock()
	exampleClusters = append(exampleClusters, c)
	examplesMu.Unlock()
	return c.endpoints()
}

// closingM runs the tests and examples, then closes the examples' fake
// clusters, before goleak looks for goroutines left behind.
type closingM struct{ *testing.M }

// Run implements goleak.TestingM.
func (m closingM) Run() int {
	code := m.M.Run()
	examplesMu.Lock()
	defer examplesMu.Unlock()
	for _, c := range exampleClusters {
		c.close()
	}
	exampleClusters = nil
	return code
}
