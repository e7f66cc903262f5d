//go:build faults

package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ticketd/ticketd/sdk/ticketdtest"

	"github.com/ticketd/ticketd/faults/check"
	"github.com/ticketd/ticketd/faults/history"
	"github.com/ticketd/ticketd/faults/nemesis"
	"github.com/ticketd/ticketd/faults/powerfs"
)

// Config is one run of the suite.
type Config struct {
	// Backend is the consensus backend: "hashicorp" or "etcd".
	Backend string
	// Nodes is the cluster size, 3 or 5.
	Nodes int
	// Seed chooses the fault schedule and the workers' choices; the same
	// seed replays the same schedule.
	Seed int64
	// Duration is how long the workload and the faults run (the checks and
	// the liveness and durability phases come after).
	Duration time.Duration
	// Workers is the number of concurrent hot-key clients; default 6.
	Workers int
	// Keys is the number of hot keys; default 3.
	Keys int
	// RWWorkers is the number of readers-writer clients: they
	// take the keys rw/0 and rw/1 shared (70%) or exclusive; default 3,
	// -1 for none.
	RWWorkers int
	// SemWorkers is the number of semaphore clients: sem/0 (limit 2) and
	// sem/1 (limit 3), more clients than slots; one request in twenty gives
	// a limit one higher (refused with LimitMismatch while the key is held
	// or waited for); default 4, -1 for none.
	SemWorkers int
	// SessionWorkers is the number of session clients: each opens sessions
	// of LeaseMS and holds two or three of sess/0..sess/3 under them;
	// default 2, -1 for none.
	SessionWorkers int
	// LeaseMS is the workers' lease in milliseconds; default 1500.
	LeaseMS int64
	// ElectionTimeout is the cluster's election timeout; default 500ms
	// (heartbeat: a fifth of it).
	ElectionTimeout time.Duration
	// Kinds restricts the faults (empty: every nemesis.Kind).
	Kinds []nemesis.Kind
	// Schedule, when set, is injected instead of the one Seed generates (a
	// regression test pinning a scenario).
	Schedule *nemesis.Schedule
	// Out is the directory reports of failing runs go to; default
	// $TMPDIR/ticketd-faults-reports.
	Out string
	// CheckTimeout bounds the linearizability check; default 5m.
	CheckTimeout time.Duration
	// Start, when set, starts the cluster instead of StartCluster (with
	// the backend, cluster size and election timeout of the run), for
	// example over hosts in network namespaces (faults/hosts); it fails t
	// when it cannot. Kinds should then include what the cluster
	// supports, such as nemesis.NetKinds.
	Start func(t *testing.T, backend string, nodes int, electionTimeout time.Duration) Cluster
	// Auth runs the cluster with authorization on (docs/security.md#authorization): a policy and
	// a tokens file, every request of the workers and the nemesis
	// authenticated by a bearer token (loopback, no TLS; forwarded requests
	// carry the token). Ignored when Start is set.
	Auth bool
	// HistoryFile, when set, is where every run's history is written
	// (history.Write), failing or not.
	HistoryFile string
	// TLS runs the cluster with client TLS, client-certificate authentication
	// and mutual TLS between peers (docs/security.md); the workload presents a client
	// certificate.
	TLS bool
	// LogStore is every node's Raft log store (--raft-log-store: "badger"
	// or "wal"); "" leaves ticketd's default.
	LogStore string
	// PowerLoss puts the nodes' data dirs on a file system of the run's own
	// that keeps unsynced writes apart (faults/powerfs; needs root and
	// /dev/fuse, skipped otherwise), schedules power cuts
	// (nemesis.PowerSchedule) unless Kinds or Schedule say otherwise, and
	// makes the restart of every node before the final reads a power cut
	// too. Ignored when Start is set.
	PowerLoss bool
	// PowerJournal makes powerfs treat every sync as a journal commit of
	// all name changes before it (powerfs.Options.Journal) instead of
	// requiring a directory's own fsync (docs/faults.md#power-loss).
	PowerJournal bool
}

func (c Config) withDefaults() Config {
	if c.Backend == "" {
		c.Backend = "hashicorp"
	}
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Duration == 0 {
		c.Duration = 45 * time.Second
	}
	if c.Workers == 0 {
		c.Workers = 6
	}
	if c.Keys == 0 {
		c.Keys = 3
	}
	if c.RWWorkers == 0 {
		c.RWWorkers = 3
	}
	if c.SemWorkers == 0 {
		c.SemWorkers = 4
	}
	if c.SessionWorkers == 0 {
		c.SessionWorkers = 2
	}
	if c.LeaseMS == 0 {
		c.LeaseMS = 1500
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = 500 * time.Millisecond
	}
	if c.Out == "" {
		c.Out = filepath.Join(os.TempDir(), "ticketd-faults-reports")
	}
	if c.CheckTimeout == 0 {
		c.CheckTimeout = 5 * time.Minute
	}
	return c
}

// FailoverBound is how long after the faults are healed the cluster may
// take before a dead holder's lock is expired, on top of its lease: up to
// two elections (each at most twice the election timeout, randomised),
// the new leader's barrier entry, the lessor's promotion (which restarts
// every deadline at now + lease_ms), and the commit of the Expire, with
// room for a loaded two-core CI machine: 4 election timeouts + 3s.
func FailoverBound(electionTimeout time.Duration) time.Duration {
	return 4*electionTimeout + 3*time.Second
}

// probeLeaseMS is the lease of the durability prober's locks: long enough
// to outlive the restart of every node at the end of the run.
const probeLeaseMS = 120_000

// Result summarises a run.
type Result struct {
	// Backend and Seed identify the run.
	Backend string
	Seed    int64
	// Ops counts the calls recorded; Outcomes splits them by outcome.
	Ops      int
	Outcomes map[history.Outcome]int
	// Faults counts the faults injected without error; FaultErrors those that
	// could not be (no leader to aim at, a membership call refused, ...).
	Faults      int
	FaultErrors int
	// Events is what the nemesis did, the final restart of every node included.
	Events []nemesis.Event
	// Report is the checkers' verdict.
	Report check.Report
	// Dir is where the report was written (failing runs only).
	Dir string
	// Recovery is the worst time to recover after each fault kind (see Recovery).
	Recovery map[nemesis.Kind]time.Duration
	// Codes counts the calls that did not succeed by kind, outcome and error,
	// and the calls of the tagged phases (probe, liveness, final) by outcome.
	Codes map[string]int
	// PowerCuts says what each power cut dropped (Config.PowerLoss), the
	// final one included.
	PowerCuts []powerfs.Loss
}

// String summarises r on one line.
func (r Result) String() string {
	s := fmt.Sprintf("%s seed %d: %d ops (%d ok, %d fail, %d unknown), %d faults (+%d not injected), linearizability %s in %v, %d violations",
		r.Backend, r.Seed, r.Ops, r.Outcomes[history.OK], r.Outcomes[history.Fail], r.Outcomes[history.Unknown],
		r.Faults, r.FaultErrors, r.Report.Linearizability.Verdict(), r.Report.Linearizability.Elapsed.Round(time.Millisecond),
		len(r.Report.Violations))
	if len(r.PowerCuts) > 0 {
		cuts := make([]string, len(r.PowerCuts))
		for i, l := range r.PowerCuts {
			cuts[i] = l.String()
		}
		s += fmt.Sprintf("; %d power cuts dropped: %s", len(cuts), strings.Join(cuts, "; "))
	}
	return s
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// RemoveBinary deletes the ticketd binary built by this process, if any;
// call it from TestMain after the tests ran.
func RemoveBinary() {
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
}

// prebuiltEnv names an environment variable that, when set, is the path of
// a ticketd already built with -tags faults: a run of many seeds then tests
// one binary, whatever happens to the tree meanwhile.
const prebuiltEnv = "TICKETD_FAULTS_BIN"

// binary builds ticketd with -tags faults once per test process (or
// returns $TICKETD_FAULTS_BIN).
func binary() (string, error) {
	if p := os.Getenv(prebuiltEnv); p != "" {
		return p, nil
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ticketd-faults-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "ticketd")
		cmd := exec.Command("go", "build", "-tags", "faults", "-o", binPath, ticketdtest.Package)
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build -tags faults %s: %v\n%s", ticketdtest.Package, err, out)
		}
	})
	return binPath, binErr
}

// StartCluster starts nodes ticketd processes of backend, built with -tags
// faults, with the election timeout et (heartbeat et/5), a small snapshot
// threshold (512 entries, so restarts recover from snapshots too), and, if
// rules is not empty, that link-cut rules file. t must not be parallel
// (the binary is passed through the environment).
func StartCluster(t *testing.T, backend string, nodes int, et time.Duration, rules string) *ticketdtest.Cluster {
	t.Helper()
	return startCluster(t, backend, nodes, et, startOptions{rules: rules})
}

// startOptions are startCluster's settings beyond StartCluster's.
type startOptions struct {
	rules     string // the link-cut rules file ("": none)
	auth, tls bool   // Config.Auth, Config.TLS
	logStore  string // Config.LogStore
	dataRoot  string // where the data dirs are made ("": the cluster's temporary directory)
	// trailingLogs is the entries each node keeps after a compaction (0:
	// the backend's default).
	trailingLogs int
}

// startCluster is StartCluster with o's settings.
func startCluster(t *testing.T, backend string, nodes int, et time.Duration, o startOptions) *ticketdtest.Cluster {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(ticketdtest.BinEnv, bin)
	opts := ticketdtest.Options{
		Nodes:   nodes,
		Backend: backend,
		Args: []string{
			fmt.Sprintf("--raft-election-timeout-ms=%d", et.Milliseconds()),
			fmt.Sprintf("--raft-heartbeat-ms=%d", max(et.Milliseconds()/5, 10)),
			"--raft-snapshot-threshold=512",
		},
		DataRoot: o.dataRoot,
	}
	if o.logStore != "" {
		opts.Args = append(opts.Args, "--raft-log-store="+o.logStore)
	}
	if o.rules != "" {
		opts.Env = append(opts.Env, rulesEnv+"="+o.rules)
	}
	if o.trailingLogs > 0 {
		opts.Env = append(opts.Env, fmt.Sprintf("%s=%d", trailingLogsEnv, o.trailingLogs))
	}
	if o.tls {
		opts.TLS = tlsOptions(t, nodes)
	}
	if o.auth {
		opts.Args = append(opts.Args, authArgs(t)...)
		opts.BearerToken = faultsToken
	}
	return ticketdtest.Start(t, opts)
}

// Run runs one fault-injection run against a fresh cluster and checks it;
// it fails t on a violation (after writing the report) or when the cluster
// cannot be started.
func Run(t *testing.T, cfg Config) Result {
	t.Helper()
	cfg = cfg.withDefaults()
	rules := filepath.Join(t.TempDir(), "rules")
	et := cfg.ElectionTimeout
	var tg Cluster
	var local *target // the loopback cluster (nil with Start)
	if cfg.Start != nil {
		tg = cfg.Start(t, cfg.Backend, cfg.Nodes, et)
		cfg.PowerLoss = false
	} else {
		so := startOptions{rules: rules, auth: cfg.Auth, tls: cfg.TLS, logStore: cfg.LogStore}
		var power *powerfs.FS
		if cfg.PowerLoss {
			// Mounted before the cluster starts, so unmounted after it stops.
			power, so.dataRoot = mountPower(t, powerfs.Options{Journal: cfg.PowerJournal})
			so.trailingLogs = powerTrailingLogs
		}
		local = &target{c: startCluster(t, cfg.Backend, cfg.Nodes, et, so), rules: rules, power: power}
		tg = local
	}
	c := tg

	var sched nemesis.Schedule
	switch {
	case cfg.Schedule != nil:
		sched = *cfg.Schedule
	case cfg.PowerLoss && len(cfg.Kinds) == 0:
		sched = nemesis.PowerSchedule(cfg.Seed, cfg.Duration)
	default:
		sched = nemesis.Generate(cfg.Seed, nemesis.Config{
			Nodes: cfg.Nodes, Length: cfg.Duration, ElectionTimeout: et,
			Lease: time.Duration(cfg.LeaseMS) * time.Millisecond, Kinds: cfg.Kinds,
		})
	}
	t.Logf("ticketd faults: backend %s, %d nodes, tls %v, auth %v, log store %q, power loss %v, replay with %s\n%s",
		cfg.Backend, cfg.Nodes, cfg.TLS, cfg.Auth, cfg.LogStore, cfg.PowerLoss, replayFlags(cfg), sched)

	rec := history.NewRecorder()
	ex := nemesis.NewExecutor(tg, rec.Now)
	var maxToken atomic.Uint64
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	keys := make([]string, cfg.Keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("hot/%d", i)
	}
	probeKeys := []string{"probe/0", "probe/1", "probe/2", "probe/3"}
	newClient := func(id int, tag string) *client {
		return &client{id: id, rec: rec, c: c, rng: rand.New(rand.NewSource(cfg.Seed*1000 + int64(id))), tag: tag, timeout: 4 * et}
	}
	for w := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			newClient(w, "").worker(ctx, keys, cfg.LeaseMS, func() uint64 { return maxToken.Load() })
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); newClient(cfg.Workers, "probe").prober(ctx, probeKeys, probeLeaseMS) }()
	// The readers-writer, semaphore and session workloads, with client ids
	// after the liveness and final clients' (Workers+1, Workers+2).
	extra := startHolderWorkloads(ctx, &wg, cfg, func(id int) *client { return newClient(cfg.Workers+3+id, "") },
		func() uint64 { return maxToken.Load() })
	allKeys := append(append([]string(nil), keys...), extra...)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				for _, op := range rec.History() {
					if op.Kind == history.Acquire && op.Outcome == history.OK && op.Token > maxToken.Load() {
						maxToken.Store(op.Token)
					}
				}
			}
		}
	}()
	nemDone := make(chan struct{})
	go func() { defer close(nemDone); ex.Run(ctx, sched) }()
	<-ctx.Done()
	wg.Wait()
	<-nemDone
	stopped := rec.Now()

	// Heal, then liveness: every hot key must come free.
	var phaseErr []error
	if err := ex.HealAll(context.Background()); err != nil {
		phaseErr = append(phaseErr, fmt.Errorf("heal: %w", err))
	}
	lctx, lcancel := context.WithTimeout(context.Background(), time.Minute)
	if _, err := agreedLeader(lctx, tg); err != nil {
		phaseErr = append(phaseErr, fmt.Errorf("after healing: %w", err))
	}
	lcancel()
	healed := rec.Now()
	window := &check.LivenessWindow{Stopped: stopped, Healed: healed, LeaseMS: cfg.LeaseMS, FailoverBound: FailoverBound(et)}
	poll := newClient(cfg.Workers+1, check.TagLiveness)
	for _, key := range allKeys {
		for rec.Now() < window.Deadline()+int64(3*time.Second) {
			if op := poll.get(key); op.Outcome == history.OK && !op.Held {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// Durability: kill -9 every node at once (with PowerLoss: and cut the
	// power), start them, read everything.
	lastRestart := nemesis.RestartAll
	if cfg.PowerLoss {
		lastRestart = nemesis.PowerCut
	}
	restart := nemesis.NewExecutor(tg, rec.Now)
	restart.Run(context.Background(), nemesis.Schedule{Faults: []nemesis.Fault{{Kind: lastRestart}}})
	lctx, lcancel = context.WithTimeout(context.Background(), time.Minute)
	if _, err := agreedLeader(lctx, tg); err != nil {
		phaseErr = append(phaseErr, fmt.Errorf("after restarting every node: %w", err))
	}
	lcancel()
	final := newClient(cfg.Workers+2, check.TagFinal)
	for _, key := range append(append([]string(nil), allKeys...), probeKeys...) {
		for attempt := 0; attempt < 20; attempt++ {
			if op := final.get(key); op.Outcome == history.OK {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	var lastToken uint64
	for i := range c.Size() {
		st, err := status(context.Background(), tg, i)
		if err == nil {
			lastToken = max(lastToken, st.GetLastToken())
		}
	}

	ops := rec.History()
	events := append(ex.Events(), restart.Events()...)
	res := Result{Backend: cfg.Backend, Seed: cfg.Seed, Ops: len(ops), Outcomes: map[history.Outcome]int{}, Events: events}
	if local != nil {
		res.PowerCuts = local.powerCuts()
	}
	for _, op := range ops {
		res.Outcomes[op.Outcome]++
	}
	for _, ev := range ex.Events() {
		if ev.Err == "" {
			res.Faults++
		} else {
			res.FaultErrors++
		}
	}
	codes := map[string]int{}
	for _, op := range ops {
		if op.Tag != "" {
			codes["("+op.Tag+" "+op.Kind.String()+" "+op.Outcome.String()+")"]++
		}
		if op.Outcome != history.OK {
			codes[op.Kind.String()+" "+op.Outcome.String()+" "+firstWords(op.Code, 3)]++
		}
	}
	res.Codes = codes
	if cfg.HistoryFile != "" {
		if err := writeHistory(cfg.HistoryFile, ops); err != nil {
			t.Errorf("writing the history: %v", err)
		}
	}
	res.Report = check.Run(check.Input{Ops: ops, FinalLastToken: lastToken, Liveness: window, Timeout: cfg.CheckTimeout})
	t.Log(res.String())
	res.Recovery = Recovery(ex.Events(), ops)
	t.Logf("  worst time to recover after each fault kind (heal to the first acknowledged write):\n%s", formatRecovery(res.Recovery))
	t.Logf("  calls that did not succeed, and calls of the tagged phases:\n%s", formatCounts(res.Codes))
	for _, ev := range events {
		t.Logf("  fault %s", ev)
	}
	if err := res.Report.Err(); err != nil || len(phaseErr) > 0 {
		dir := filepath.Join(cfg.Out, fmt.Sprintf("%s-%dn-seed%d-%s", cfg.Backend, cfg.Nodes, cfg.Seed, time.Now().Format("20060102-150405")))
		res.Dir = dir
		if werr := writeReport(dir, cfg, sched, events, ops, res, tg, errors.Join(phaseErr...)); werr != nil {
			t.Errorf("writing the report to %s: %v", dir, werr)
		}
		if err != nil {
			t.Errorf("%v\nreport: %s", err, dir)
		}
		for _, e := range phaseErr {
			t.Errorf("%v (report: %s)", e, dir)
		}
	}
	return res
}

// writeReport stores everything needed to understand and replay a failing run.
func writeReport(dir string, cfg Config, sched nemesis.Schedule, events []nemesis.Event, ops []history.Op, res Result, tg Cluster, phaseErr error) error {
	notes := make([]porcupine.Annotation, 0, len(events))
	for _, ev := range events {
		notes = append(notes, porcupine.Annotation{
			Tag: "nemesis", Start: ev.Start, End: ev.End,
			Description: fmt.Sprintf("%s %v", ev.Fault.Kind, nodeIDs(tg, ev.Nodes)), Details: ev.String(),
			BackgroundColor: "#fde2e2",
		})
	}
	if err := res.Report.Write(dir, ops, notes); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "backend %s, %d nodes, duration %v, lease %dms, election timeout %v\n", cfg.Backend, cfg.Nodes, cfg.Duration, cfg.LeaseMS, cfg.ElectionTimeout)
	fmt.Fprintf(&b, "replay: cd faults && go test -tags faults -run TestFaults ./harness -args %s\n\n", replayFlags(cfg))
	b.WriteString(sched.String())
	b.WriteString("\nwhat the nemesis did:\n")
	for _, ev := range events {
		fmt.Fprintf(&b, "%s (%v)\n", ev, nodeIDs(tg, ev.Nodes))
	}
	if phaseErr != nil {
		fmt.Fprintf(&b, "\nphase errors: %v\n", phaseErr)
	}
	fmt.Fprintf(&b, "\n%s\n", res)
	if err := os.WriteFile(filepath.Join(dir, "schedule.txt"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	return copyLogs(tg, dir)
}

// replayFlags returns the TestFaults flags that replay the run of cfg.
func replayFlags(cfg Config) string {
	s := fmt.Sprintf("-seed=%d -backend=%s -nodes=%d -duration=%v", cfg.Seed, cfg.Backend, cfg.Nodes, cfg.Duration)
	if cfg.LogStore != "" {
		s += " -log-store=" + cfg.LogStore
	}
	if cfg.PowerLoss {
		s += " -power"
		if cfg.PowerJournal {
			s += " -power-journal"
		}
	}
	return s
}

func nodeIDs(tg Cluster, nodes []int) []string {
	out := make([]string, 0, len(nodes))
	for _, i := range nodes {
		out = append(out, tg.NodeID(i))
	}
	sort.Strings(out)
	return out
}

func firstWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) > n {
		f = f[:n]
	}
	return strings.Join(f, " ")
}

func formatRecovery(m map[nemesis.Kind]time.Duration) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "    %-28s %v\n", k, m[nemesis.Kind(k)].Round(time.Millisecond))
	}
	return b.String()
}

func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "    %6d %s\n", m[k], k)
	}
	return b.String()
}

// writeHistory stores ops in path (history.Write).
func writeHistory(path string, ops []history.Op) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := history.Write(f, ops); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
