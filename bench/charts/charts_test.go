package charts_test

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/charts"
	"github.com/ticketd/ticketd/bench/report"
)

func row(workload, system string, c int, perSec, p50, p99 float64) report.Row {
	return report.Row{Workload: workload, System: system, Concurrency: c, Rounds: 1, Ops: 10,
		PerSec: perSec, P50US: p50, P90US: p50, P99US: p99, P999US: p99}
}

func TestWrite(t *testing.T) {
	s := report.Summary{Rows: []report.Row{
		row(report.WorkloadCommit, report.SystemHashicorp, 1, 2000, 450, 900),
		row(report.WorkloadCommit, report.SystemHashicorp, 16, 20000, 700, 2500),
		row(report.WorkloadCommit, report.SystemEtcd, 1, 1800, 520, 1100),
		row(report.WorkloadCommit, report.SystemEtcd, 16, 15000, 900, 4000),
		row(report.WorkloadLock, report.SystemEtcdMutex, 1, 500, 2000, 4000),
	}}
	dir := t.TempDir()
	files, err := charts.Write(dir, s)
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
		fh, err := os.Open(f)
		require.NoError(t, err)
		img, err := png.Decode(fh)
		fh.Close()
		require.NoError(t, err, f)
		require.Greater(t, img.Bounds().Dx(), 100)
	}
	require.Equal(t, []string{"commit-latency.png", "commit-throughput.png", "lock-latency.png", "lock-throughput.png"}, names)
}

func TestWriteNothingMeasured(t *testing.T) {
	files, err := charts.Write(t.TempDir(), report.Summary{})
	require.NoError(t, err)
	require.Empty(t, files)
}
