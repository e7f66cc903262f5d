package report_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/report"
)

// everyAim is a run with a measurement for every aim of the pipelined
// handoff benchmarks (docs/benchmarks.md, Aims), some held and some missed.
func everyAim() *report.Report {
	const (
		C, L, R, H = report.WorkloadCommit, report.WorkloadLock, report.WorkloadRenew, report.WorkloadHandoff
		On, Off    = report.WorkloadSnapshotsOn, report.WorkloadSnapshotsOff
		Hc, Et     = report.SystemHashicorp, report.SystemEtcd
		Mu, KA     = report.SystemEtcdMutex, report.SystemEtcdKeepAlive
	)
	r := &report.Report{Floors: floors(), Measurements: []report.Measurement{
		// floor 140 µs: hashicorp (faster) 270 µs = 1.93× ≤ 2; etcd 360 µs = 2.57× > 2.5.
		m(1, C, Hc, 1, 100, 1000, 270, 900), m(1, C, Et, 1, 100, 1000, 360, 900),
		m(1, L, Hc, 1, 100, 1600, 1, 1), m(1, L, Mu, 1, 100, 1000, 1, 1), // 1.6× ≥ 1.5
		m(1, L, Et, 256, 100, 3000, 1, 1), m(1, L, Mu, 256, 100, 2000, 1, 1), // 1.5× < 2
		m(1, H, Hc, 2, 100, 900, -40, 500), m(1, H, Et, 2, 100, 700, 400, 900), m(1, H, Mu, 2, 100, 300, 5000, 9000),
		m(1, H, Hc, 32, 100, 150, 300, 900), m(1, H, Mu, 32, 100, 100, 5000, 9000),
		m(1, On, Hc, 64, 100, 1, 1, 1150), m(1, Off, Hc, 64, 100, 1, 1, 1000), // 1.15×
		m(1, On, Et, 64, 100, 1, 1, 2500), m(1, Off, Et, 64, 100, 1, 1, 1000), // 2.5×
		m(1, R, Et, 64, 100, 5000, 1, 1), m(1, R, KA, 64, 100, 6000, 1, 1),
	},
		Failovers: []report.Failover{
			{System: Hc, Kill: 1, MS: 2500}, {System: Hc, Kill: 2, MS: 1500}, {System: Hc, Kill: 3, MS: 3200},
			{System: Et, Kill: 1, MS: 700}, {System: Et, Kill: 2, MS: 900}, {System: Et, Kill: 3, Err: "no write"},
		},
		Elections: []report.Elections{
			{System: Hc, Workload: L, Concurrency: 256, TermBefore: 2, TermAfter: 2},
			{System: Hc, Workload: L, Concurrency: 16, TermBefore: 2, TermAfter: 3},
			{System: Et, Workload: L, Concurrency: 256, TermBefore: 2, TermAfter: 4},
		},
	}
	r.Summarize()
	return r
}

// aimCase is an aim a test expects: measured, held or missed, with its value.
type aimCase struct {
	name  string
	held  bool
	value float64
}

// requireAims checks, in a subtest per case, that aims holds each case's
// aim, measured, held or missed as expected, with its value; it returns
// aims by name.
func requireAims(t *testing.T, aims []report.Aim, cases []aimCase) map[string]report.Aim {
	t.Helper()
	got := map[string]report.Aim{}
	for _, a := range aims {
		got[a.Name] = a
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, ok := got[tc.name]
			require.True(t, ok, "aim missing")
			require.True(t, a.Measured)
			require.Equal(t, tc.held, a.Held)
			require.InDelta(t, tc.value, a.Value, 1e-9)
		})
	}
	return got
}

func TestAimsHeldAndMissed(t *testing.T) {
	got := requireAims(t, everyAim().Summary.Aims, []aimCase{
		{"commit p50 at 1 client vs floor (hashicorp)", true, 270.0 / 140},
		{"commit p50 at 1 client vs floor (etcd)", false, 360.0 / 140},
		{"lock cycles/s vs etcd Mutex at 1 client", true, 1.6},
		{"lock cycles/s vs etcd Mutex at 256 clients", false, 1.5},
		{"contended handoffs/s vs etcd Mutex at 2 clients", true, 3},
		{"contended handoffs/s vs etcd Mutex at 32 clients", false, 1.5},
		{"handoff p50 vs commit p50 at 1 client (hashicorp, 2 clients)", true, -40.0 / 270},
		{"handoff p50 vs commit p50 at 1 client (etcd, 2 clients)", false, 400.0 / 360},
		{"commit p99 snapshots on vs off at 64 clients (hashicorp)", true, 1.15},
		{"commit p99 snapshots on vs off at 64 clients (etcd)", false, 2.5},
		{"renewals/s vs etcd LeaseKeepAlive at 64 clients", false, 5000.0 / 6000},
		{"failover, kill -9 of the leader (hashicorp)", false, 2500},
		{"failover, kill -9 of the leader (etcd)", true, 800},
		{"elections during the 256-client API runs (hashicorp)", true, 0},
		{"elections during the 256-client API runs (etcd)", false, 2},
	})
	nm := got["lock cycles/s vs etcd Mutex at 16 clients"]
	require.False(t, nm.Measured, "every target is listed, unmeasured ones as such")
	require.False(t, got["contended handoffs/s vs etcd Mutex at 8 clients"].Measured)
}

func TestSummarizeFailoverAndElections(t *testing.T) {
	s := everyAim().Summary
	require.Equal(t, []report.FailoverFigure{
		{System: report.SystemHashicorp, Kills: 3, MedianMS: 2500, MinMS: 1500, MaxMS: 3200},
		{System: report.SystemEtcd, Kills: 2, Failed: 1, MedianMS: 800, MinMS: 700, MaxMS: 900},
	}, s.Failover)
	require.Equal(t, []report.ElectionFigure{
		{System: report.SystemHashicorp, Levels: 2, AtMax: 1, Total: 1, AtMaxElections: 0},
		{System: report.SystemEtcd, Levels: 1, AtMax: 1, Total: 2, AtMaxElections: 2},
	}, s.Elections)
}
