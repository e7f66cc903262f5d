package report

import (
	"time"

	"github.com/ticketd/ticketd/bench/latency"
	"github.com/ticketd/ticketd/bench/load"
)

// Workloads measured by ticketbench.
const (
	// WorkloadCommit: one Grant or Release per operation through
	// core.Consensus.Propose on the leader of an in-process three-node backend
	// cluster; latency is Propose call → result returned on the leader.
	WorkloadCommit = "commit"
	// WorkloadLock: one Acquire+Release cycle per operation on a key of the
	// worker's own, through ticketd's Connect API (systems SystemHashicorp and
	// SystemEtcd) or through etcd's concurrency.Mutex (SystemEtcdMutex).
	WorkloadLock = "lock"
	// WorkloadRenew: one renewal of a lock the worker holds (acquired once,
	// before the measurement) per operation: ticketd's Renew through the
	// Connect API, a replicated command (docs/design.md#leases; systems
	// SystemHashicorp and SystemEtcd), or etcd's LeaseKeepAlive
	// (clientv3 KeepAliveOnce on a lease of the worker's own,
	// SystemEtcdKeepAlive), which etcd's leader answers without a log entry.
	WorkloadRenew = "renew"
	// WorkloadKeepAlive: one keep-alive of a session per operation: each
	// worker holds a session of its own with KeepAliveKeys locks
	// under it (opened before the measurement) and keeps it alive in a
	// loop through the Go SDK (one message on the session's
	// LockService.KeepAliveStream per keep-alive), one Raft entry renewing
	// the session and every lock of it (systems SystemHashicorp and
	// SystemEtcd); the peer (SystemEtcdKeepAlive) keeps alive a lease of the
	// worker's own with KeepAliveKeys keys attached, one request and its
	// response per operation on one LeaseKeepAlive stream the worker keeps
	// open, as clientv3's KeepAlive does (see bench/etcdpeer).
	WorkloadKeepAlive = "keepalive"
	// WorkloadHandoff: the contended handoff workload: N workers
	// on ONE key, each Acquire-with-wait then Release in a loop (ticketd's
	// API; peer: etcd's concurrency.Mutex on one shared prefix). Row.PerSec
	// is handoffs/s and the latencies are handoff latencies (package
	// bench/handoff): the next holder's Acquire returning minus the previous
	// holder's Release returning, which may be negative.
	WorkloadHandoff = "handoff"
	// WorkloadSnapshotsOn and WorkloadSnapshotsOff: the commit workload at
	// AimSnapshotConcurrency clients on a fresh cluster with the snapshot
	// threshold at its default (snapshots and log compaction running) and
	// with a threshold no run reaches (none), measured back to back.
	WorkloadSnapshotsOn  = "snapshots-on"
	WorkloadSnapshotsOff = "snapshots-off"
	// WorkloadSharedKey, WorkloadExclusiveKey, WorkloadSemaphoreKey and
	// WorkloadDistinctKeys: the shared-locks benchmark, one
	// Acquire (wait=true) + Release cycle per operation through ticketd's
	// API, every worker on the one key in MODE_SHARED, on the one key
	// exclusively, on a slot of the one key as a semaphore of limit 8, or
	// each on a key of its own exclusively (the baseline without
	// contention). Row.PerSec is cycles/s; latency is the whole cycle.
	WorkloadSharedKey    = "shared-key"
	WorkloadExclusiveKey = "exclusive-key"
	WorkloadSemaphoreKey = "semaphore-key"
	WorkloadDistinctKeys = "distinct-keys"
)

// Systems measured by ticketbench.
const (
	// SystemHashicorp is ticketd's hashicorp/raft backend.
	SystemHashicorp = "hashicorp"
	// SystemEtcd is ticketd's etcd-io/raft backend.
	SystemEtcd = "etcd"
	// SystemEtcdMutex is the peer: etcd itself (three embedded members) with
	// client/v3 concurrency.Mutex.
	SystemEtcdMutex = "etcd-mutex"
	// SystemEtcdKeepAlive is the peer running the renew workload (etcd's
	// LeaseKeepAlive, one KeepAliveOnce per operation, as each ticketd
	// Renew is one unary call) and the keepalive workload (one request on
	// a LeaseKeepAlive stream per operation, as ticketd's SDK sends each
	// session keep-alive on a KeepAliveStream).
	SystemEtcdKeepAlive = "etcd-keepalive"
)

// KeepAliveKeys is how many locks each session (etcd: keys each lease)
// holds in WorkloadKeepAlive.
const KeepAliveKeys = 10

// StoreSystem is the system name of ticketd's backend with Raft log store
// store (backends.LogStores): the backend's name for defaultStore (the
// default store, backends.DefaultLogStore, which the other workloads run
// on) or an empty store, and backend + "/" + store for another
// ("hashicorp/badger"). Runs made while badger was the default named
// badger's rows "hashicorp" and the WAL's "hashicorp/wal"
// (docs/benchmarks.md#default-log-store). The caller passes the default:
// this package does not import the backends (the etcd peer's module
// builds it too).
func StoreSystem(backend, store, defaultStore string) string {
	if store == "" || store == defaultStore {
		return backend
	}
	return backend + "/" + store
}

// PeerSystem returns the peer system whose figures ticketd's are compared
// with for workload (SystemEtcdMutex for locks, SystemEtcdKeepAlive for
// renewals), or "" when there is none.
func PeerSystem(workload string) string {
	switch workload {
	case WorkloadLock:
		return SystemEtcdMutex
	case WorkloadRenew, WorkloadKeepAlive:
		return SystemEtcdKeepAlive
	case WorkloadHandoff:
		return SystemEtcdMutex
	}
	return ""
}

// IsPeer reports whether system is a peer (etcd itself), not ticketd.
func IsPeer(system string) bool {
	return system == SystemEtcdMutex || system == SystemEtcdKeepAlive
}

// Report is every figure of one ticketbench run. JSON names are those of
// report.json. It is a plain value: fill it from one goroutine, then read it
// (Summarize and the Write methods) from any.
type Report struct {
	// Started and Finished bound the run (wall clock).
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Machine is where the run happened, Settings what it was asked to do.
	Machine  Machine  `json:"machine"`
	Settings Settings `json:"settings"`
	// Floors holds one physical-floor measurement per round.
	Floors []Floor `json:"floors"`
	// Measurements holds one entry per (round, workload, system, concurrency).
	Measurements []Measurement `json:"measurements"`
	// Elections holds the leader elections counted around each level of the
	// API workloads (lock, renew, handoff), from the Raft term.
	Elections []Elections `json:"elections,omitempty"`
	// Failovers holds one entry per leader kill of the failover measurement.
	Failovers []Failover `json:"failovers,omitempty"`
	// Scale holds the scale workload's figures, one per backend and step.
	Scale []ScaleStep `json:"scale,omitempty"`
	// CPU holds the CPU time each process used over a part of the run.
	CPU []CPUShare `json:"cpu,omitempty"`
	// Notes says what was skipped or failed and why (e.g. the peer could not
	// be built); figures of a skipped part are absent.
	Notes []string `json:"notes,omitempty"`
	// Summary is derived from the above by Summarize.
	Summary Summary `json:"summary"`
}

// Machine describes where the run happened.
type Machine struct {
	// CPUs is runtime.NumCPU(); GOOS, GOARCH and GoVersion the Go runtime's.
	CPUs      int    `json:"cpus"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	GoVersion string `json:"go_version"`
	// DataDir is the directory the clusters' data and the fsync floor file
	// were in; Device and Filesystem are those it is mounted from.
	DataDir    string `json:"data_dir"`
	Device     string `json:"device,omitempty"`
	Filesystem string `json:"filesystem,omitempty"`
	// LoadAvgStart and LoadAvgEnd are the 1-minute load averages when the run
	// began and ended (/proc/loadavg; -1 where unknown): other work on the
	// machine competes with the clusters for CPU and shows here.
	LoadAvgStart float64 `json:"load_avg_start"`
	LoadAvgEnd   float64 `json:"load_avg_end"`
}

// Settings are the flags the run was made with.
type Settings struct {
	// DurationSec is each measurement's window and WarmupSec the unrecorded
	// run before it, in seconds.
	DurationSec float64 `json:"duration_sec"`
	WarmupSec   float64 `json:"warmup_sec"`
	// Concurrency lists the client counts, Backends the ticketd backends.
	Concurrency []int    `json:"concurrency"`
	Backends    []string `json:"backends"`
	// Rounds is how many times every measurement was repeated, backends alternating.
	Rounds int `json:"rounds"`
	// Mode is "closed" or "open"; RatePerSec the open-loop schedule.
	Mode       load.Mode `json:"mode"`
	RatePerSec float64   `json:"rate_per_sec,omitempty"`
	// Peer says whether the etcd Mutex peer was asked for.
	Peer bool `json:"peer"`
	// ElectionTimeoutMS and HeartbeatMS are the Raft timing the clusters
	// ran with when it was not the shipped default (0: default), in
	// milliseconds; FailoverBackoffMaxMS the SDK backoff cap of the
	// failover clients when not the SDK's default; FailoverArgs extra
	// `ticketd serve` flags of the failover cluster.
	ElectionTimeoutMS    int64    `json:"election_timeout_ms,omitempty"`
	HeartbeatMS          int64    `json:"heartbeat_ms,omitempty"`
	FailoverBackoffMaxMS int64    `json:"failover_backoff_max_ms,omitempty"`
	FailoverArgs         []string `json:"failover_args,omitempty"`
	// Scale is the scale workload's settings, nil when it did not run.
	Scale *ScaleSettings `json:"scale,omitempty"`
}

// Floor is one round's physical floor: a 100-byte append + fdatasync on the
// data directory's disk, a 64-byte TCP ping-pong on loopback, and a 100-byte
// single-entry badger transaction with SyncWrites on the same disk.
type Floor struct {
	// Round is the round (from 1) the figures were taken in.
	Round int `json:"round"`
	// Fsync, RTT and Badger are the three measurements (floor.Fsync,
	// floor.RTT, floor.Badger); Badger is zero if it failed.
	Fsync  latency.Summary `json:"fsync"`
	RTT    latency.Summary `json:"rtt"`
	Badger latency.Summary `json:"badger"`
}

// Measurement is one workload on one system at one concurrency in one round.
type Measurement struct {
	// Round is the round (from 1) it was taken in.
	Round int `json:"round"`
	// Workload is WorkloadCommit or WorkloadLock; System one of the System… names.
	Workload string `json:"workload"`
	System   string `json:"system"`
	// Result holds the figures; its fields are inlined in the JSON.
	load.Result
}

// Summary is what the reader is told: medians over rounds, ratios and aims.
type Summary struct {
	// Floor is the physical floor, medians over rounds.
	Floor FloorFigure `json:"floor"`
	// Rows holds one row per (workload, system, concurrency), ordered by
	// workload, system (hashicorp, etcd, etcd-mutex) and concurrency.
	Rows []Row `json:"rows"`
	// Ratios compares Rows with each other and with Floor.
	Ratios Ratios `json:"ratios"`
	// Elections sums Report.Elections per system.
	Elections []ElectionFigure `json:"elections,omitempty"`
	// Failover summarizes Report.Failovers per backend.
	Failover []FailoverFigure `json:"failover,omitempty"`
	// Scale is Report.Scale ordered by backend and table size.
	Scale []ScaleStep `json:"scale,omitempty"`
	// Aims says which of the aims (docs/benchmarks.md) this run met.
	Aims []Aim `json:"aims"`
}

// Elections is how many leader elections happened on one cluster while one
// level of a workload ran: the leader's Raft term after minus before (with
// pre-vote on, a term only grows by a real election; Raft thesis §9.6).
type Elections struct {
	// Round, Workload, System and Concurrency say which level it was.
	Round       int    `json:"round"`
	Workload    string `json:"workload"`
	System      string `json:"system"`
	Concurrency int    `json:"concurrency"`
	// TermBefore and TermAfter are the terms read through Status.
	TermBefore uint64 `json:"term_before"`
	TermAfter  uint64 `json:"term_after"`
}

// Count is TermAfter − TermBefore (0 if the term went backwards).
func (e Elections) Count() uint64 {
	if e.TermAfter < e.TermBefore {
		return 0
	}
	return e.TermAfter - e.TermBefore
}

// ElectionFigure is the elections counted on one system's clusters.
type ElectionFigure struct {
	// System is the backend.
	System string `json:"system"`
	// Levels is how many levels were watched, AtMax how many of them ran at
	// AimElectionsConcurrency clients.
	Levels int `json:"levels"`
	AtMax  int `json:"at_max"`
	// Total is the elections over every watched level, AtMaxElections those
	// during levels at AimElectionsConcurrency clients.
	Total          uint64 `json:"total"`
	AtMaxElections uint64 `json:"at_max_elections"`
}

// Failover is one kill -9 of the leader of a three-process cluster.
type Failover struct {
	// System is the backend, Kill the kill's number (from 1).
	System string `json:"system"`
	Kill   int    `json:"kill"`
	// MS is the time from the kill to the first write acknowledged through a
	// survivor (the SDK's Acquire of a fresh key, sent after the kill), in
	// milliseconds; 0 when Err is set.
	MS float64 `json:"ms"`
	// Err says why this kill gave no figure.
	Err string `json:"err,omitempty"`
}

// FailoverFigure summarizes the kills of one backend.
type FailoverFigure struct {
	// System is the backend; Kills counts the kills with a figure, Failed
	// those without.
	System string `json:"system"`
	Kills  int    `json:"kills"`
	Failed int    `json:"failed"`
	// MedianMS, MinMS and MaxMS are over those figures, in milliseconds.
	MedianMS float64 `json:"median_ms"`
	MinMS    float64 `json:"min_ms"`
	MaxMS    float64 `json:"max_ms"`
}

// CPUShare is the CPU time one process used during one part of the run
// (/proc/<pid>/stat utime+stime): how the machine's CPUs were shared between
// the clients and the nodes.
type CPUShare struct {
	// Part is what ran ("failover/hashicorp", "in-process workloads").
	Part string `json:"part"`
	// Process names the process ("ticketbench: load clients", "ticketd n1").
	Process string `json:"process"`
	// CPUSec is user+system CPU seconds, WallSec the part's wall time.
	CPUSec  float64 `json:"cpu_sec"`
	WallSec float64 `json:"wall_sec"`
	// Share is CPUSec ÷ (WallSec × the machine's CPUs): the fraction of the
	// whole machine the process had.
	Share float64 `json:"share"`
}

// FloorFigure is the physical floor, each figure the median over rounds.
type FloorFigure struct {
	// FsyncP50US and FsyncP99US are the 100-byte append + fdatasync; RTTP50US
	// and RTTP99US the loopback round trip; all in microseconds, as are the
	// other …US fields.
	FsyncP50US float64 `json:"fsync_p50_us"`
	FsyncP99US float64 `json:"fsync_p99_us"`
	RTTP50US   float64 `json:"rtt_p50_us"`
	RTTP99US   float64 `json:"rtt_p99_us"`
	// FloorUS is FsyncP50US + RTTP50US: the least a commit can take.
	FloorUS float64 `json:"floor_us"`
	// BadgerP50US and BadgerP99US are badger's durable single-entry write;
	// BadgerFloorUS is BadgerP50US + RTTP50US, the least a commit through
	// badger can take. Zero when not measured.
	BadgerP50US   float64 `json:"badger_p50_us"`
	BadgerP99US   float64 `json:"badger_p99_us"`
	BadgerFloorUS float64 `json:"badger_floor_us"`
	// Rounds and the sample counts (summed over rounds) the figures come from.
	Rounds        int   `json:"rounds"`
	FsyncSamples  int64 `json:"fsync_samples"`
	RTTSamples    int64 `json:"rtt_samples"`
	BadgerSamples int64 `json:"badger_samples"`
}

// Row is one (workload, system, concurrency): each figure the median over the
// rounds that measured it.
type Row struct {
	// Workload, System and Concurrency identify the row: WorkloadCommit or
	// WorkloadLock, one of the System… names, and the number of clients.
	Workload    string `json:"workload"`
	System      string `json:"system"`
	Concurrency int    `json:"concurrency"`
	// Rounds is how many rounds the medians are over; Ops and Errors are
	// summed over those rounds.
	Rounds int   `json:"rounds"`
	Ops    int64 `json:"ops"`
	Errors int64 `json:"errors"`
	// PerSec is operations per second: commits/s (commit) or
	// Acquire+Release cycles/s (lock).
	PerSec float64 `json:"per_sec"`
	// P50US, P90US, P99US and P999US are the latency percentiles in
	// microseconds: each the median over rounds of the round's percentile.
	P50US  float64 `json:"p50_us"`
	P90US  float64 `json:"p90_us"`
	P99US  float64 `json:"p99_us"`
	P999US float64 `json:"p999_us"`
	// ServerCPUPer1k and ClientCPUPer1k are the CPU seconds the server
	// processes (ticketd's nodes, etcd's members) and the client processes
	// used per 1,000 operations over the measured window (load.Result.CPU),
	// each the median over the rounds that metered it (CPURounds); 0 when
	// not metered. ClientCPUPer1k is 0 too when the clients ran inside the
	// server process (the commit workload: ServerCPUPer1k includes them).
	ServerCPUPer1k float64 `json:"server_cpu_sec_per_1k,omitempty"`
	ClientCPUPer1k float64 `json:"client_cpu_sec_per_1k,omitempty"`
	CPURounds      int     `json:"cpu_rounds,omitempty"`
}

// Ratios are the comparisons the report makes, each from Rows.
type Ratios struct {
	// Backends compares etcd to hashicorp per workload and concurrency.
	Backends []BackendRatio `json:"backends"`
	// Floor divides each backend's commit p50 by FloorFigure.FloorUS.
	Floor []FloorRatio `json:"floor"`
	// Peer divides ticketd's lock throughput by etcd Mutex's, and its renew
	// throughput by etcd LeaseKeepAlive's (PeerRatio.Workload says which).
	Peer []PeerRatio `json:"peer"`
	// Holding compares the shared-locks benchmark's cases with each other
	// on one backend (HoldingPairs): shared and semaphore cycles/s on one
	// key ÷ exclusive ones on one key, and shared ÷ distinct keys.
	Holding []HoldingRatio `json:"holding,omitempty"`
}

// HoldingPairs are the (numerator, denominator) workloads of
// Ratios.Holding, in report order.
var HoldingPairs = [][2]string{
	{WorkloadSharedKey, WorkloadExclusiveKey},
	{WorkloadSemaphoreKey, WorkloadExclusiveKey},
	{WorkloadSharedKey, WorkloadDistinctKeys},
}

// HoldingRatio is Workload's figures ÷ Over's on one ticketd backend at one
// concurrency, both medians over rounds (shared-acquire throughput beside
// exclusive). Above 1× in PerSec, Workload cycles faster;
// above 1× in P50 or P99, its cycles take longer.
type HoldingRatio struct {
	// Workload is the numerator's workload, Over the denominator's (one of
	// HoldingPairs).
	Workload string `json:"workload"`
	Over     string `json:"over"`
	// System is the ticketd backend, Concurrency the number of clients.
	System      string `json:"system"`
	Concurrency int    `json:"concurrency"`
	// PerSec and OverPerSec are the two rows' cycles/s; Ratio is
	// PerSec ÷ OverPerSec.
	PerSec     float64 `json:"per_sec"`
	OverPerSec float64 `json:"over_per_sec"`
	Ratio      float64 `json:"ratio"`
	// P50 and P99 divide the rows' cycle latency percentiles.
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// BackendRatio is etcd ÷ hashicorp for one workload at one concurrency
// (> 1 for PerSec means etcd is faster; > 1 for P50 means etcd is slower).
type BackendRatio struct {
	// Workload and Concurrency say which two Rows are compared.
	Workload    string `json:"workload"`
	Concurrency int    `json:"concurrency"`
	// PerSec, P50 and P99 are the ratios of the rows' PerSec, P50US and P99US.
	PerSec float64 `json:"per_sec"`
	P50    float64 `json:"p50"`
	P99    float64 `json:"p99"`
}

// FloorRatio is one backend's median commit p50 ÷ the floor at one
// concurrency; BadgerRatio divides it by the badger floor instead (zero when
// that was not measured).
type FloorRatio struct {
	// System (a backend) and Concurrency say which Row is compared.
	System      string `json:"system"`
	Concurrency int    `json:"concurrency"`
	// Ratio is P50US (the row's, in microseconds) ÷ FloorUS (FloorFigure's,
	// in microseconds).
	P50US   float64 `json:"p50_us"`
	FloorUS float64 `json:"floor_us"`
	Ratio   float64 `json:"ratio"`
	// BadgerRatio is P50US ÷ BadgerFloorUS.
	BadgerFloorUS float64 `json:"badger_floor_us,omitempty"`
	BadgerRatio   float64 `json:"badger_ratio,omitempty"`
}

// PeerRatio is ticketd's (one backend's) lock cycles/s ÷ etcd Mutex's at one
// concurrency, both medians over rounds.
type PeerRatio struct {
	// Workload is WorkloadLock (peer: etcd Mutex), WorkloadRenew or
	// WorkloadKeepAlive (peer: etcd LeaseKeepAlive) or WorkloadHandoff;
	// empty in reports written before it existed (then WorkloadLock).
	Workload string `json:"workload,omitempty"`
	// System is the ticketd backend, Concurrency the number of clients.
	System      string `json:"system"`
	Concurrency int    `json:"concurrency"`
	// Ratio is PerSec (ticketd's operations/s) ÷ PeerPerSec (the peer's).
	PerSec     float64 `json:"per_sec"`
	PeerPerSec float64 `json:"peer_per_sec"`
	Ratio      float64 `json:"ratio"`
	// ServerCPU is ticketd's server CPU per operation ÷ the peer's
	// (Row.ServerCPUPer1k of both rows); 0 when either was not metered.
	// Below 1×, ticketd's servers spend less CPU per operation.
	ServerCPU float64 `json:"server_cpu,omitempty"`
}

// Units of Aim.Value.
const (
	// UnitRatio: a dimensionless ratio.
	UnitRatio = "ratio"
	// UnitPerSec: operations per second.
	UnitPerSec = "per_sec"
)

// Aim is one target the benchmarks aim at (docs/benchmarks.md) and whether
// this run met it.
type Aim struct {
	// Name says what is aimed at, Target the threshold in words.
	Name   string `json:"name"`
	Target string `json:"target"`
	// Measured is false when the run did not measure what the aim needs
	// (e.g. no run at 64 clients); Held is then false too.
	Measured bool `json:"measured"`
	Held     bool `json:"held"`
	// Value is the figure compared to the target, in Unit (UnitRatio or
	// UnitPerSec); Detail says which system and inputs it comes from.
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Detail string  `json:"detail"`
}
