// Package ticketdtest starts real ticketd clusters for tests, the way
// net/http/httptest starts real HTTP servers: N `ticketd serve` processes on
// free loopback ports, data in t.TempDir(), one backend by name, and helpers
// to find the leader and to inject process faults (SIGKILL, SIGSTOP/SIGCONT,
// restart). Tests then talk to the nodes with any client: the generated
// Connect clients, the ticketd SDK, curl, buf curl or grpcurl.
//
// The ticketd binary is taken from $TICKETD_BIN when set; otherwise it is
// built once per test process with `go build
// github.com/ticketd/ticketd/server/cmd/ticketd`, which needs the ticketd
// go.work workspace (run the tests from inside the repository). The package
// depends only on the standard library, the generated API in sdk/gen and
// its own procstop, so the sdk module does not depend on the server module.
//
// # Usage
//
//  1. c := ticketdtest.Start(t, ticketdtest.Options{Nodes: 3, Backend: "hashicorp"}).
//     Start waits until every node agrees on a leader; t.Cleanup stops the
//     processes (and prints the tail of each node's log if the test failed).
//  2. Reach node i at c.Node(i).APIAddr (host:port, HTTP/1.1 and h2c), or
//     use c.Lock(i) and c.Cluster(i), generated Connect clients over h2c.
//  3. Find the leader with c.Leader(t) or c.WaitLeader(t, timeout); read a
//     node's gauges and counters with c.Metric(i, "ticketd_waiters").
//  4. Inject faults: c.Kill(i) (kill -9), c.Stop(i)/c.Cont(i) (pause and
//     resume; Stop returns once every thread of the node has stopped, see
//     package procstop), c.Restart(i) (same addresses and data),
//     c.Terminate(i) (graceful SIGTERM).
//
// Example:
//
//	func TestFailover(t *testing.T) {
//		c := ticketdtest.Start(t, ticketdtest.Options{Nodes: 3})
//		l := c.Leader(t)
//		res, err := c.Lock(l).Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 5000})
//		...
//		c.Kill(l)
//		nl := c.WaitLeader(t, 10*time.Second) // a new leader, among the others
//		...
//	}
package ticketdtest
