// Package e2e holds ticketd's end-to-end tests: they start real `ticketd
// serve` processes on loopback through sdk/ticketdtest and drive them with
// real clients (the generated Connect clients, curl with Connect JSON, and
// `buf curl` over gRPC with reflection), injecting process faults (kill -9,
// SIGSTOP/SIGCONT).
//
// # Usage
//
//  1. Run from inside the repository (the ticketd binary is built through the
//     go.work workspace) or set TICKETD_BIN to a prebuilt binary.
//  2. Choose the backends with TICKETD_TEST_BACKENDS (comma-separated;
//     default "hashicorp,etcd"); every test runs once per backend as a
//     subtest. The tests run side by side, each on clusters of its own
//     (parallel tests; go test's -parallel, by default the number of CPUs,
//     bounds how many run at once), after the few that run alone.
//  3. go test -p 1 ./e2e
//
// Example:
//
//	TICKETD_TEST_BACKENDS=etcd go test -count=1 ./e2e
package e2e
