package report_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/report"
)

// TestHoldingRatios: the shared-locks benchmark's cases are compared with
// each other per backend and clients, and get tables of their
// own in the Markdown and text reports.
func TestHoldingRatios(t *testing.T) {
	const (
		S, X = report.WorkloadSharedKey, report.WorkloadExclusiveKey
		M, D = report.WorkloadSemaphoreKey, report.WorkloadDistinctKeys
		H, E = report.SystemHashicorp, report.SystemEtcd
	)
	r := &report.Report{Measurements: []report.Measurement{
		m(1, S, H, 16, 100, 3000, 500, 1000), m(1, X, H, 16, 100, 500, 4000, 8000),
		m(1, M, H, 16, 100, 2000, 800, 1600), m(1, D, H, 16, 100, 4000, 400, 900),
		m(1, S, E, 16, 100, 1500, 500, 1000), // etcd: no exclusive rows, so no ratio
	}}
	r.Summarize()
	require.Equal(t, []report.HoldingRatio{
		{Workload: S, Over: X, System: H, Concurrency: 16, PerSec: 3000, OverPerSec: 500, Ratio: 6, P50: 0.125, P99: 0.125},
		{Workload: S, Over: D, System: H, Concurrency: 16, PerSec: 3000, OverPerSec: 4000, Ratio: 0.75, P50: 1.25, P99: 1000.0 / 900},
		{Workload: M, Over: X, System: H, Concurrency: 16, PerSec: 2000, OverPerSec: 500, Ratio: 4, P50: 0.2, P99: 0.2},
	}, r.Summary.Ratios.Holding)

	var md, txt bytes.Buffer
	require.NoError(t, r.WriteMarkdown(&md))
	require.NoError(t, r.WriteTable(&txt))
	require.Contains(t, md.String(), "## Shared lock (N clients on one key")
	require.Contains(t, md.String(), "| ticketd/hashicorp | 16 | shared-key | exclusive-key | 3000 | 500 | 6.00× | 0.12× | 0.12× |")
	require.Contains(t, txt.String(), "shared-key    ÷ exclusive-key 6.00×")
}

// TestHoldingSectionsOnlyWhenMeasured: a report without the shared-locks
// benchmark has no empty tables for it.
func TestHoldingSectionsOnlyWhenMeasured(t *testing.T) {
	r := sample()
	r.Summarize()
	var md bytes.Buffer
	require.NoError(t, r.WriteMarkdown(&md))
	require.NotContains(t, md.String(), "Shared lock")
	require.NotContains(t, md.String(), "Semaphore")
	require.Empty(t, r.Summary.Ratios.Holding)
}
