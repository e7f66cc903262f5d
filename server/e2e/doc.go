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
//     subtest. Every test runs side by side with the others, each on
//     clusters, ports and data dirs of its own (parallel tests and
//     subtests): go test's -parallel bounds how many run at once, four
//     unless given (the tests mostly wait on timers, not on the CPU).
//  3. go test -p 1 ./e2e
//
// Example:
//
//	TICKETD_TEST_BACKENDS=etcd go test -count=1 ./e2e
package e2e
