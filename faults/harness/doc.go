//go:build faults

// Package harness is ticketd's fault-injection suite (docs/faults.md): it starts a
// real three- or five-node ticketd cluster as separate processes
// (sdk/ticketdtest, with ticketd built with -tags faults so that peer links
// can be cut), drives concurrent clients through the generated Connect
// clients on a few hot keys — acquire with and without wait, renew,
// release, get, check-token, each with a client-chosen owner — records
// every call (package history), injects a seeded, replayable schedule of
// faults (package nemesis), and checks the history afterwards (package
// check): linearizability with porcupine, fencing, lease safety,
// durability and liveness.
//
// Beside the hot keys, three workloads of shared locks, semaphores and
// sessions run (Config.RWWorkers,
// SemWorkers, SessionWorkers; -holders=false leaves them out): readers-
// writer clients take rw/0 and rw/1 shared or exclusive and check their
// token while holding; semaphore clients compete for sem/0 (limit 2) and
// sem/1 (limit 3), more clients than slots; session clients open a
// session, acquire two or three of sess/0..sess/3 under it, keep it alive,
// and close it or let it expire. Their histories record mode, limit and
// session, and the same checks cover them (package check).
//
// It is behind the build tag `faults` because it builds and runs real
// processes for a minute or more. `make faults DURATION=30m` runs the long
// version; the short one (about a minute per backend) runs in `make test`.
// `make faults NET=hosts` (test flag -net=hosts) runs the same workload and
// checks over one network namespace per node (faults/hosts, through
// Config.Start), with the network faults of nemesis.NetKinds added.
// `make faults-power` (test flags -power, -log-store) runs power-loss runs
// (Config.PowerLoss): the data dirs on a powerfs mount (faults/powerfs),
// power cuts of every node (nemesis.PowerCut) that drop every unsynced
// write, and a power cut for the durability phase's restart.
//
// # A run
//
//  1. Build ticketd with -tags faults; start the cluster with
//     TICKETD_FAULTS_RULES naming a rules file the harness rewrites to cut
//     links (each line "FROM TO" drops Raft messages from FROM to TO
//     through backends.Config.DropMessage).
//  2. Print the seed and the schedule. Run the workers, a durability prober
//     (long-lease locks it keeps renewing and sometimes releases) and the
//     nemesis for Config.Duration.
//  3. Stop the workers (every holder dies without releasing: liveness),
//     heal every fault and wait for a leader.
//  4. Liveness: poll every hot key until it is free again; each must be
//     free by max(stopped, healed) + lease + FailoverBound.
//  5. Durability: kill -9 every node at once (with Config.PowerLoss, and
//     cut the power), start them again, read every key (tagged "final")
//     and every node's last_token.
//  6. Check; on a violation write the seed, the schedule, what the nemesis
//     did, the history, the violations, porcupine's HTML visualisation and
//     the node logs to Config.Out, and fail the test.
//
// # Caller duties
//
//  1. Call Run from a test goroutine (it uses t for the cluster's cleanup
//     and fails t on a violation).
//  2. Keep the ticketd workspace around: the binary is built from it.
//  3. Replay a failing run with the same -seed, -backend and -nodes (and
//     -duration): the same schedule is injected, though timing makes the
//     operations differ.
//
// Example:
//
//	res := harness.Run(t, harness.Config{Backend: "etcd", Nodes: 3, Seed: 42, Duration: time.Minute})
//	t.Logf("%d ops, %d faults", res.Ops, res.Faults)
package harness
