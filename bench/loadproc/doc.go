// Package loadproc runs a workload's clients in a process of their own, so
// that the CPU the servers spend per operation can be told apart from the
// clients' (on a 2-core machine in-process clients take CPU the servers
// would otherwise have): the parent (the process serving the cluster, or
// holding it) starts a child — by default its own executable — with a Spec
// on stdin; the child drives the Spec's workload with package load,
// samples the CPU of the server processes (Spec.Servers, by default the
// parent) and of itself at the window's edges (cputime.Meter), and prints
// the load.Result as JSON on stdout.
//
// ticketbench runs ticketd's clients this way against its in-process
// nodes, and bench/etcdpeer runs etcd's clients this way against its
// embedded members, so both sides are measured alike: the servers in one
// process, their clients in another, the same /proc readings at the same
// instants.
//
// # Usage
//
//  1. The program calls Serve first thing in main (and in TestMain for its
//     tests): in a child it runs the Spec with the given Measure and exits;
//     in the parent it returns false at once.
//  2. The parent calls Run with a Spec per measurement.
//
// Example:
//
//	func main() {
//		if loadproc.Serve(measure) { return }
//		...
//		res, err := loadproc.Run(ctx, loadproc.Spec{Workload: "lock", Target: url, Load: cfg})
//	}
package loadproc
