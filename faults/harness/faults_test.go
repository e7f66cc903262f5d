//go:build faults

package harness_test

import (
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ticketd/ticketd/faults/harness"
	"github.com/ticketd/ticketd/faults/nemesis"
)

var (
	duration = flag.Duration("duration", 40*time.Second, "how long the workload and the faults run, per backend")
	seed     = flag.Int64("seed", 0, "seed of the fault schedule and the workload (0: from the clock, printed)")
	backend  = flag.String("backend", "all", "backend to test: hashicorp, etcd, or all")
	nodes    = flag.Int("nodes", 3, "cluster size: 3 or 5")
	out      = flag.String("out", "", "directory for reports of failing runs (default $TMPDIR/ticketd-faults-reports)")
	kinds    = flag.String("kinds", "", "comma-separated fault kinds to use (default: all)")
	netMode  = flag.String("net", "", `where the nodes run: "" (loopback processes) or "hosts" (one network namespace per node, real network faults)`)
	auth     = flag.Bool("auth", false, "run with authorization on (a policy and a bearer token for the workload; harness.Config.Auth)")
	tlsFor   = flag.String("tls", "etcd", `backends whose run uses client TLS, client-certificate auth and peer mutual TLS: "all", "none", or a comma-separated list (default: etcd, so the short run covers both modes)`)
	histOut  = flag.String("history", "", "write every run's history to this path (with the backend's name appended)")
	holders  = flag.Bool("holders", true, "run the readers-writer, semaphore and session workloads beside the exclusive one")
	disk     = flag.Bool("disk", false, "add the disk faults (nemesis.DiskKinds: a damaged log file, a full disk on tmpfs; needs root) to the default kinds")
	power    = flag.Bool("power", false, "power-loss run: data dirs on faults/powerfs (needs root and /dev/fuse), power cuts of every node (nemesis.PowerSchedule unless -kinds), the final restart a power cut too")
	powerJnl = flag.Bool("power-journal", false, "with -power: any sync also makes every earlier name change durable (powerfs.Options.Journal), as ext4's and XFS's journal does")
	logStore = flag.String("log-store", "", `every node's Raft log store (--raft-log-store: "badger" or "wal"; default: ticketd's)`)
)

// startHosts, set on Linux (hosts_linux_test.go), skips t where network
// namespaces are unavailable and returns the Config.Start of -net=hosts.
var startHosts func(t *testing.T) func(t *testing.T, backend string, nodes int, et time.Duration) harness.Cluster

func TestMain(m *testing.M) {
	code := m.Run()
	harness.RemoveBinary()
	os.Exit(code)
}

// backends lists the backends a run covers.
func backends() []string {
	if *backend == "all" {
		return []string{"hashicorp", "etcd"}
	}
	return strings.Split(*backend, ",")
}

// usesTLS reports whether -tls asks for backend b's run to use TLS.
func usesTLS(b string) bool {
	switch *tlsFor {
	case "all":
		return true
	case "none", "":
		return false
	}
	for _, x := range strings.Split(*tlsFor, ",") {
		if x == b {
			return true
		}
	}
	return false
}

// TestFaults is the fault-injection run: one per backend, -duration each.
// `make test` runs it with the defaults (a short run); `make faults
// DURATION=30m` runs the long one.
func TestFaults(t *testing.T) {
	s := *seed
	if s == 0 {
		s = time.Now().UnixNano() % 1_000_000_007
	}
	var ks []nemesis.Kind
	for _, k := range strings.Split(*kinds, ",") {
		if k != "" {
			ks = append(ks, nemesis.Kind(k))
		}
	}
	var start func(t *testing.T, backend string, nodes int, et time.Duration) harness.Cluster
	if *netMode == "hosts" {
		if startHosts == nil {
			t.Skip("-net=hosts needs Linux network namespaces")
		}
		start = startHosts(t)
		if len(ks) == 0 {
			ks = append(append([]nemesis.Kind(nil), nemesis.Kinds...), nemesis.NetKinds...)
		}
	}
	if *disk && len(ks) == 0 && *netMode == "" {
		ks = append(append([]nemesis.Kind(nil), nemesis.Kinds...), nemesis.DiskKinds...)
	}
	for _, b := range backends() {
		t.Run(b, func(t *testing.T) {
			cfg := harness.Config{Backend: b, Nodes: *nodes, Seed: s, Duration: *duration, Out: *out, Kinds: ks, Start: start, Auth: *auth, TLS: usesTLS(b),
				LogStore: *logStore, PowerLoss: *power, PowerJournal: *powerJnl}
			if *histOut != "" {
				cfg.HistoryFile = *histOut + "." + b + ".jsonl"
			}
			if !*holders {
				cfg.RWWorkers, cfg.SemWorkers, cfg.SessionWorkers = -1, -1, -1
			}
			res := harness.Run(t, cfg)
			t.Logf("summary: %s", res)
		})
	}
}

// TestPowerCut is the short power-loss run of make test: one seed per
// backend, 4 s of workload with a power cut of every node at a random
// moment and another before the final reads (faults/powerfs), hashicorp on
// badger and etcd on its own write-ahead log, so that both backends and
// both log stores lose their unsynced writes at least once. The badger run
// counts names as durable after any sync (-power-journal, as ext4 and XFS
// do): badger does not sync its directory after a memtable flush, which
// the POSIX rule punishes (docs/faults.md#power-loss). It needs root and
// /dev/fuse and is skipped otherwise. `make faults-power` runs many seeds.
func TestPowerCut(t *testing.T) {
	for _, run := range []struct {
		backend, store string
		journal        bool
	}{{"hashicorp", "badger", true}, {"etcd", "wal", false}} {
		t.Run(run.backend+"_"+run.store, func(t *testing.T) {
			res := harness.Run(t, harness.Config{Backend: run.backend, LogStore: run.store, Seed: 1, Duration: 4 * time.Second,
				PowerLoss: true, PowerJournal: run.journal})
			t.Logf("summary: %s", res)
			if len(res.PowerCuts) != 2 {
				t.Errorf("%d power cuts, want 2 (one in the run, one before the final reads)", len(res.PowerCuts))
			}
		})
	}
}
