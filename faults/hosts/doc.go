// Package hosts runs a ticketd cluster as a set of real hosts inside one
// machine: one Linux network namespace per node, each with its
// own address on a private /24 that exists only inside the namespaces this
// package creates, all joined by a bridge that lives in a namespace of its
// own (never in the root namespace, so no traffic can leave). Real
// `ticketd serve` processes run inside the node namespaces (`ip netns
// exec`), with the production flags; the test process reaches them as a
// client through a namespace of its own, by creating each client socket on
// an OS thread that has entered that namespace (setns(2) on a locked
// thread).
//
// Faults are real network faults, the ones Jepsen injects between hosts:
// a link set down (a full partition of one host, clients included), a
// blackhole route in one namespace (one-way loss: that host's packets to
// another are dropped), a leader cut from its peers but not from its
// clients (Consul #54, the Jepsen 2014 etcd/Consul stale read), a flapping
// link, and a node restarted on a new address that rejoins through
// membership. Cluster implements nemesis.Target (Cut maps each cut link to
// a blackhole route) and nemesis.NetTarget, so the seeded nemesis composes
// them with kill -9 and SIGSTOP.
//
// The nodes run plaintext with --insecure (when the binary knows the
// flag: a node refuses a non-loopback address without TLS otherwise), or,
// with Config.TLS, with the production security flags: TLS and client
// certificates on the API, mutual TLS between peers, every certificate
// made in the test (crypto/x509) for the node's current address.
//
// The scenario tests of this package (behind the `faults` build tag, which
// `make test` passes) check, on both backends and with the porcupine model
// and the lease and fencing checkers of package check: stale reads and
// writes through a leader cut from its peers only, membership changes
// (--join, remove, replace a dead member, remove a partitioned member and
// heal it), and a node moved to a new address. `make faults NET=hosts`
// runs the seeded nemesis (package harness) over hosts.
//
// Everything needs root and the `ip` command (iproute2); NewNetwork
// returns an error wrapping ErrUnsupported when either is missing, and
// tests skip with that message (Skip).
//
// # Usage
//
//  1. Call Skip(t) first: it skips the test, saying why, when the machine
//     cannot create namespaces.
//  2. c := Start(t, Config{Backend: "etcd", Nodes: 3}) creates the network
//     (names "td-<pid>-<seq>-…", unique per run), starts the nodes
//     bootstrapped together and waits for an agreed leader. Everything is
//     torn down by t.Cleanup, and by a SIGINT/SIGTERM handler if the run
//     is interrupted; namespaces left by runs whose process is gone are
//     swept at the next start.
//  3. Talk to node i with c.Lock(i) and c.Cluster(i) (Connect over h2c
//     from the client namespace).
//  4. Inject faults with c.Net() (Down, Up, Block, Isolate, Heal) or c.Kill,
//     c.Pause, c.Move, c.AddNode, c.RemoveMember; or hand c to a
//     nemesis.Executor.
//
// Example:
//
//	hosts.Skip(t)
//	c := hosts.Start(t, hosts.Config{Backend: "hashicorp", Nodes: 3})
//	l := c.WaitLeader(t, time.Minute)
//	c.Net().Isolate(c.Node(l).Host, c.Hosts()...) // peers only; clients still reach it
//	defer c.Net().Heal()
package hosts
