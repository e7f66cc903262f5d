package report_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/report"
)

// scaleRun is a scale run of two steps per backend (etcd's steps listed
// first and out of order: the summary orders them): hashicorp holds every
// aim, etcd misses every one. hashicorp also has a sessions step after its
// last exclusive one (listed first), whose figures would miss every aim
// but its data dir after the renewals: only that aim is judged on it.
func scaleRun() *report.Report {
	const Hc, Et = report.SystemHashicorp, report.SystemEtcd
	r := &report.Report{Scale: []report.ScaleStep{
		{System: Hc, Locks: 100_000, Sessions: 1000, SessionLocks: 100_000, FillPerSec: 10, SessionFillPerSec: 10,
			FailoverMS: []float64{9000}, PromotionMS: []float64{900}, TransferMS: []float64{900}, TransferRefused: 3,
			RestartReadyMS: 9000, SnapshotSaveMS: 9000, RestoreMS: 9000, SnapshotBytes: 5_000_000,
			DataDirBytes: []int64{20e6, 20e6, 20e6}, RSSBytes: []int64{9e9, 9e9, 9e9}, Renewals: 300,
			RenewedDataDirBytes: []int64{12e6, 14e6, 13e6}},
		{System: Et, Locks: 100_000, FillPerSec: 1000, FailoverMS: []float64{2500, 3000, 2000}, PromotionMS: []float64{900},
			TransferMS: []float64{700, 600, 900}, TransferWrites: 40, TransferRefused: 2, TransferRetried: 9,
			RestartReadyMS: 8000, SnapshotSaveMS: 5000, RestoreMS: 6000, SnapshotBytes: 4_000_000,
			DataDirBytes: []int64{10e6, 30e6, 20e6}, RSSBytes: []int64{1e9, 2e9, 1e9}, Renewals: 500,
			RenewedDataDirBytes: []int64{12e6, 40e6, 20e6}},
		{System: Et, Locks: 10_000, FillPerSec: 2000, FailoverMS: []float64{800}},
		{System: Hc, Locks: 10_000, FillPerSec: 2000, FailoverMS: []float64{700, 600, 800}},
		{System: Hc, Locks: 100_000, FillPerSec: 1800, FailoverMS: []float64{900, 1000, 800}, PromotionMS: []float64{3, 5, 4},
			TransferMS: []float64{120, 90, 400}, TransferWrites: 50, TransferRetried: 3,
			RestartReadyMS: 2000, SnapshotSaveMS: 400, RestoreMS: 300, SnapshotBytes: 4_000_000,
			DataDirBytes: []int64{9e6, 11e6, 10e6}, RSSBytes: []int64{3e8, 3e8, 4e8}},
	}}
	r.Summarize()
	return r
}

func TestScaleAims(t *testing.T) {
	r := scaleRun()
	s := r.Summary
	require.Len(t, s.Scale, 5)
	var order []string
	for _, st := range s.Scale {
		order = append(order, st.System+" "+st.Label())
	}
	require.Equal(t, []string{"hashicorp 10k", "hashicorp 100k", "hashicorp 100k + 1k sessions × 100 = 200k", "etcd 10k", "etcd 100k"}, order,
		"report order: hashicorp first, each backend's sessions step after its last exclusive step")

	requireAims(t, s.Aims, []aimCase{
		{"scale: failover, kill -9 of the leader at 100k locks (hashicorp)", true, 900},
		{"scale: failover at 100k locks (hashicorp) vs at 10k locks", true, 900.0 / 700},
		{"scale: graceful transfer-leader → first write at 100k locks (hashicorp)", true, 120},
		{"scale: writes refused through transfer-leader at 100k locks (hashicorp)", true, 0},
		{"scale: Raft leadership → promotion at 100k locks (hashicorp)", true, 4},
		{"scale: follower kill -9 → ready at 100k locks (hashicorp)", true, 2000},
		{"scale: snapshot save at 100k locks (hashicorp)", true, 400},
		{"scale: snapshot restore at 100k locks (hashicorp)", true, 300},
		{"scale: largest data dir vs snapshot at 100k + 1k sessions × 100 = 200k locks (hashicorp)", true, 14e6 / 5e6}, // after the renewals, which follow the sessions step
		{"scale: largest node RSS at 100k locks (hashicorp)", true, 4e8},
		{"scale: fill rate at 100k locks (hashicorp) vs the step before", true, 0.9},

		{"scale: failover, kill -9 of the leader at 100k locks (etcd)", false, 2500},
		{"scale: failover at 100k locks (etcd) vs at 10k locks", false, 2500.0 / 800},
		{"scale: graceful transfer-leader → first write at 100k locks (etcd)", false, 700},
		{"scale: writes refused through transfer-leader at 100k locks (etcd)", false, 2},
		{"scale: Raft leadership → promotion at 100k locks (etcd)", false, 900},
		{"scale: follower kill -9 → ready at 100k locks (etcd)", false, 8000},
		{"scale: snapshot save at 100k locks (etcd)", false, 5000}, // < 5 s, strictly
		{"scale: snapshot restore at 100k locks (etcd)", false, 6000},
		{"scale: largest data dir vs snapshot at 100k locks (etcd)", false, 40e6 / 4e6}, // after the renewals
		{"scale: largest node RSS at 100k locks (etcd)", false, 2e9},
		{"scale: fill rate at 100k locks (etcd) vs the step before", false, 0.5},
	})

	judged := 0
	for _, a := range s.Aims {
		if strings.Contains(a.Name, "sessions") {
			judged++
		}
	}
	require.Equal(t, 1, judged, "of the sessions step, only the data dir after the renewals is judged")

	var md, table bytes.Buffer
	require.NoError(t, r.WriteMarkdown(&md))
	require.Contains(t, md.String(), "## Scale")
	require.Contains(t, md.String(), "| hashicorp | 100k | 1800 | ")
	require.Contains(t, md.String(), "| hashicorp | 100k + 1k sessions × 100 = 200k | 10 | ")
	require.Contains(t, md.String(), "- hashicorp at 100k + 1k sessions × 100 = 200k locks: 1k sessions holding 100k locks filled at 10 locks/s.")
	require.Contains(t, md.String(), "- hashicorp at 100k + 1k sessions × 100 = 200k locks: data dir after 300 renewals 12.0 MB / 14.0 MB / 13.0 MB (snapshot 5.00 MB).")
	require.Contains(t, md.String(), "transfers 700ms, 600ms, 900ms; 2 writes refused, 40 acknowledged, 9 attempts retried by the SDK")
	require.Contains(t, md.String(), "data dir after 500 renewals 12.0 MB / 40.0 MB / 20.0 MB")
	require.NoError(t, r.WriteTable(&table))
	require.Contains(t, table.String(), "scale (per node n1 / n2 / n3):")
	require.Contains(t, table.String(), "100k + 1k sessions × 100 = 200k locks: fill 10/s")
}

func TestScaleAimsNotRun(t *testing.T) {
	r := &report.Report{}
	r.Summarize()
	var scale []report.Aim
	for _, a := range r.Summary.Aims {
		if a.Detail == "not measured (scale workload not run)" {
			scale = append(scale, a)
		}
	}
	require.Len(t, scale, 1, "one line stands for the scale aims when the workload did not run")
	var md bytes.Buffer
	require.NoError(t, r.WriteMarkdown(&md))
	require.NotContains(t, md.String(), "## Scale")
}

func TestFormatBytes(t *testing.T) {
	for in, want := range map[int64]string{0: "-", 812: "812 B", 37_600_000: "37.6 MB", 2_200_000_000: "2.20 GB", 120_000_000: "120 MB"} {
		require.Equal(t, want, report.FormatBytes(in), "%d", in)
	}
}
