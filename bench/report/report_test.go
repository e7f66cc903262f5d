package report_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/latency"
	"github.com/ticketd/ticketd/bench/load"
	"github.com/ticketd/ticketd/bench/report"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		want float64
	}{
		{"empty", nil, 0},
		{"one", []float64{7}, 7},
		{"odd_unsorted", []float64{9, 1, 5}, 5},
		{"even_is_mean_of_middle_two", []float64{4, 1, 3, 2}, 2.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]float64(nil), tc.xs...)
			require.Equal(t, tc.want, report.Median(tc.xs))
			require.Equal(t, in, append([]float64(nil), tc.xs...), "input must not be reordered")
		})
	}
}

func m(round int, workload, system string, c int, ops int64, perSec, p50, p99 float64) report.Measurement {
	return report.Measurement{Round: round, Workload: workload, System: system, Result: load.Result{
		Mode: load.ModeClosed, Concurrency: c, Ops: ops, PerSec: perSec, WindowSec: 1,
		Latency: latency.Summary{Count: ops, P50US: p50, P90US: p50, P99US: p99, P999US: p99, MaxUS: p99},
	}}
}

func floors() []report.Floor {
	return []report.Floor{
		{Round: 1, Fsync: latency.Summary{Count: 10, P50US: 100, P99US: 200}, RTT: latency.Summary{Count: 20, P50US: 10, P99US: 30},
			Badger: latency.Summary{Count: 5, P50US: 300, P99US: 900}},
		{Round: 2, Fsync: latency.Summary{Count: 10, P50US: 140, P99US: 300}, RTT: latency.Summary{Count: 20, P50US: 20, P99US: 40},
			Badger: latency.Summary{Count: 5, P50US: 200, P99US: 700}},
		{Round: 3, Fsync: latency.Summary{Count: 10, P50US: 120, P99US: 250}, RTT: latency.Summary{Count: 20, P50US: 30, P99US: 50}},
	}
}

func sample() *report.Report {
	const (
		C, L = report.WorkloadCommit, report.WorkloadLock
		H, E = report.SystemHashicorp, report.SystemEtcd
		P    = report.SystemEtcdMutex
	)
	r := &report.Report{Floors: floors(), Measurements: []report.Measurement{
		m(1, C, H, 1, 100, 1000, 300, 900), m(2, C, H, 1, 120, 1200, 320, 800), m(3, C, H, 1, 110, 1100, 310, 1000),
		m(1, C, E, 1, 200, 2000, 600, 1200), m(2, C, E, 1, 180, 1800, 620, 1300), m(3, C, E, 1, 0, 0, 0, 0),
		m(1, C, H, 64, 3000, 30000, 2000, 5000), m(1, C, E, 64, 1500, 15000, 3000, 9000),
		m(1, L, H, 16, 500, 5000, 3000, 6000), m(1, L, E, 16, 400, 4000, 4000, 8000), m(1, P, P, 16, 200, 2000, 8000, 9000),
	}}
	r.Measurements[5].Errors = 7
	r.Measurements[10].Workload = L
	r.Summarize()
	return r
}

func TestSummarizeFloor(t *testing.T) {
	f := sample().Summary.Floor
	require.Equal(t, 3, f.Rounds)
	require.EqualValues(t, 30, f.FsyncSamples)
	require.EqualValues(t, 60, f.RTTSamples)
	require.Equal(t, 120.0, f.FsyncP50US)
	require.Equal(t, 250.0, f.FsyncP99US)
	require.Equal(t, 20.0, f.RTTP50US)
	require.Equal(t, 140.0, f.FloorUS)
	// Round 3 has no badger figure: the badger medians are over two rounds.
	require.EqualValues(t, 10, f.BadgerSamples)
	require.Equal(t, 250.0, f.BadgerP50US)
	require.Equal(t, 800.0, f.BadgerP99US)
	require.Equal(t, 270.0, f.BadgerFloorUS)
}

func TestSummarizeRows(t *testing.T) {
	s := sample().Summary
	h1, ok := s.Find(report.WorkloadCommit, report.SystemHashicorp, 1)
	require.True(t, ok)
	require.Equal(t, 3, h1.Rounds)
	require.EqualValues(t, 330, h1.Ops)
	require.Equal(t, 1100.0, h1.PerSec)
	require.Equal(t, 310.0, h1.P50US)
	require.Equal(t, 900.0, h1.P99US)

	// The round with no successful op is left out of the medians, its errors kept.
	e1, ok := s.Find(report.WorkloadCommit, report.SystemEtcd, 1)
	require.True(t, ok)
	require.Equal(t, 2, e1.Rounds)
	require.EqualValues(t, 380, e1.Ops)
	require.EqualValues(t, 7, e1.Errors)
	require.Equal(t, 1900.0, e1.PerSec)
	require.Equal(t, 610.0, e1.P50US)

	var order []string
	for _, r := range s.Rows {
		order = append(order, r.Workload+"/"+r.System)
	}
	require.Equal(t, []string{
		"commit/hashicorp", "commit/hashicorp", "commit/etcd", "commit/etcd",
		"lock/hashicorp", "lock/etcd", "lock/etcd-mutex",
	}, order)
}

func TestRatios(t *testing.T) {
	s := sample().Summary
	require.Len(t, s.Ratios.Backends, 3)
	b := s.Ratios.Backends[0]
	require.Equal(t, report.WorkloadCommit, b.Workload)
	require.Equal(t, 1, b.Concurrency)
	require.InDelta(t, 1900.0/1100, b.PerSec, 1e-9)
	require.InDelta(t, 610.0/310, b.P50, 1e-9)

	var hFloor1 report.FloorRatio
	for _, fr := range s.Ratios.Floor {
		if fr.System == report.SystemHashicorp && fr.Concurrency == 1 {
			hFloor1 = fr
		}
	}
	require.InDelta(t, 310.0/140, hFloor1.Ratio, 1e-9)
	require.InDelta(t, 310.0/270, hFloor1.BadgerRatio, 1e-9)

	require.Len(t, s.Ratios.Peer, 2)
	require.Equal(t, report.SystemHashicorp, s.Ratios.Peer[0].System)
	require.InDelta(t, 2.5, s.Ratios.Peer[0].Ratio, 1e-9)
	require.InDelta(t, 2.0, s.Ratios.Peer[1].Ratio, 1e-9)
}

func TestAims(t *testing.T) {
	aims := map[string]report.Aim{}
	for _, a := range sample().Summary.Aims {
		aims[a.Name] = a
	}
	h := aims["commit p50 at 1 client vs floor (hashicorp)"]
	require.True(t, h.Measured)
	require.False(t, h.Held, "faster backend: 310/140 > 2")
	e := aims["commit p50 at 1 client vs floor (etcd)"]
	require.True(t, e.Measured)
	require.False(t, e.Held, "other backend: 610/140 > 2.5")
	require.Contains(t, e.Target, "2.5×")

	thr := aims["commits/s at 64 clients, faster backend"]
	require.True(t, thr.Held)
	require.Equal(t, 30000.0, thr.Value)
	require.Equal(t, report.UnitPerSec, thr.Unit)
	require.Contains(t, thr.Detail, "hashicorp")

	peer := aims["lock cycles/s vs etcd Mutex at 16 clients"]
	require.True(t, peer.Held)
	require.InDelta(t, 2.5, peer.Value, 1e-9)
}

func TestAimsNotMeasured(t *testing.T) {
	r := &report.Report{Measurements: []report.Measurement{
		m(1, report.WorkloadCommit, report.SystemHashicorp, 4, 10, 10, 1, 2),
	}}
	r.Summarize()
	require.NotEmpty(t, r.Summary.Aims)
	for _, a := range r.Summary.Aims {
		require.False(t, a.Measured, a.Name)
		require.False(t, a.Held, a.Name)
	}
}

func TestWrite(t *testing.T) {
	r := sample()
	r.Notes = []string{"peer skipped: test"}
	dir := filepath.Join(t.TempDir(), "out")
	require.NoError(t, r.Write(dir))

	f, err := os.Open(filepath.Join(dir, report.JSONFile))
	require.NoError(t, err)
	defer f.Close()
	back, err := report.ReadJSON(f)
	require.NoError(t, err)
	require.Equal(t, r.Summary, back.Summary)
	require.Equal(t, r.Measurements, back.Measurements)

	md, err := os.ReadFile(filepath.Join(dir, report.MarkdownFile))
	require.NoError(t, err)
	for _, want := range []string{"## Physical floor", "| hashicorp | 1 | 1100 | 310µs |", "| ticketd/hashicorp | 16 | 5000 |",
		"| etcd-mutex | 16 | 2000 |", "| commit | 1 | 1.73× | 1.97× |", "badger floor = badger p50 + RTT p50 = **270µs**", "| hashicorp | 1 | 310µs | 2.21× | 1.15× |", "peer skipped: test", "held", "missed"} {
		require.Contains(t, string(md), want)
	}
}

func TestWriteTable(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, sample().WriteTable(&buf))
	out := buf.String()
	for _, want := range []string{"floor = fsync p50 + RTT p50 = 140µs", "ticketd/etcd", "etcd-mutex", "[held] commits/s at 64 clients, faster backend: 30000/s"} {
		require.Contains(t, out, want)
	}
}

func TestFormatUS(t *testing.T) {
	tests := []struct {
		name string
		us   float64
		want string
	}{
		{"zero", 0, "-"},
		{"negative", -40, "−40µs"},
		{"negative_millis", -1240, "−1.24ms"},
		{"micros", 87, "87µs"},
		{"millis", 1240, "1.24ms"},
		{"tens_of_millis", 15200, "15.2ms"},
		{"hundreds_of_millis", 250000, "250ms"},
		{"seconds", 2_100_000, "2.10s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, report.FormatUS(tc.us))
		})
	}
}
