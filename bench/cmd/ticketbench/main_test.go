package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/report"
	"github.com/ticketd/ticketd/bench/suite"
)

// smokePeerEnv set to 1 adds the etcd peer to the smoke test; off by default
// because its first build (etcd's server module) takes one to two minutes on
// two cores.
const smokePeerEnv = "TICKETBENCH_SMOKE_PEER"

// TestMain lets the suite start this test binary as its client process.
func TestMain(m *testing.M) {
	if suite.ServeClients() {
		return
	}
	os.Exit(m.Run())
}

// TestSmoke runs the whole pipeline — floor, both backends' commit clusters,
// ticketd's API clusters, report, table, plots — with tiny settings and
// checks that every output is written and every figure is real.
func TestSmoke(t *testing.T) {
	out := filepath.Join(t.TempDir(), "results")
	levels := []int{1, 4}
	peer := os.Getenv(smokePeerEnv) == "1"
	args := []string{
		"-duration", "300ms", "-warmup", "100ms", "-rounds", "1", "-concurrency", "1,4",
		"-workloads", "commit,lock,renew,keepalive,handoff,shared", "-handoff-concurrency", "2", "-shared-concurrency", "4",
		"-data-dir", t.TempDir(), "-out", out, fmt.Sprintf("-peer=%v", peer),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(ctx, args, &stdout, &stderr), stderr.String())

	// Progress went to stderr, the table to stdout.
	require.Contains(t, stderr.String(), "round 1/1 · commit · hashicorp · 4 clients")
	require.Contains(t, stderr.String(), "done: ")
	for _, want := range []string{"Physical floor", "ticketd/hashicorp", "ticketd/etcd", "aims:"} {
		require.Contains(t, stdout.String(), want)
	}

	// Every output file exists; the plots are PNGs.
	for _, f := range []string{"commit-latency.png", "commit-throughput.png", "lock-latency.png", "lock-throughput.png"} {
		fh, err := os.Open(filepath.Join(out, f))
		require.NoError(t, err)
		_, err = png.Decode(fh)
		fh.Close()
		require.NoError(t, err, f)
	}
	md, rep := readOutputs(t, out)
	require.Contains(t, md, "## Aims")

	// Every figure is real: measured, error-free, ordered percentiles.
	require.Empty(t, rep.Notes, "no part may have failed")
	require.Len(t, rep.Floors, 1)
	require.Positive(t, rep.Floors[0].Fsync.Count)
	require.Positive(t, rep.Floors[0].RTT.Count)
	require.Positive(t, rep.Floors[0].Badger.Count)
	require.Positive(t, rep.Summary.Floor.FloorUS)
	want := len(suite.Backends()) * (4*len(levels) + 1 + 4) // commit, lock, renew, keepalive; handoff at 2; 4 shared cases at 4
	want += len(suite.Backends()) * len(levels)             // commit on each backend's second log store (badger)
	if peer {
		want += 3*len(levels) + 1 // etcd Mutex, etcd LeaseKeepAlive (renew, keepalive), etcd Mutex handoff
	}
	require.Len(t, rep.Measurements, want)
	seen := map[string]bool{}
	// elected names the API levels during which the cluster's term grew: a
	// leader election, which CPU starvation (a loaded machine) can cause
	// and which fails the operations sent while no leader is known — in a
	// 300 ms window, easily more than a tenth of them.
	elected := map[string]bool{}
	for _, e := range rep.Elections {
		if e.Count() > 0 {
			elected[fmt.Sprintf("%s/%s/%d", e.Workload, e.System, e.Concurrency)] = true
		}
	}
	for _, m := range rep.Measurements {
		name := fmt.Sprintf("%s/%s/%d", m.Workload, m.System, m.Concurrency)
		seen[name] = true
		require.Positive(t, m.Ops, name)
		// A leader election under CPU starvation can fail a few operations;
		// a broken workload fails most of them, with no election.
		if m.Errors > 0 {
			t.Logf("%s: %d errors (election during the level: %v), first: %s", name, m.Errors, elected[name], m.FirstError)
		}
		// A leader that steps down (it lost contact with a quorum while
		// starved of CPU) fails what was sent to it with "not leader"
		// before any new term shows; the level lost its leader all the same.
		lostLeader := elected[name] || strings.Contains(m.FirstError, "not leader")
		if !lostLeader {
			require.LessOrEqual(t, m.Errors*10, m.Ops, "%s: more than 10%% of operations failed with no election: %s", name, m.FirstError)
		}
		require.Equal(t, m.Ops, m.Latency.Count, name)
		if m.Workload != report.WorkloadHandoff { // a handoff may be negative
			require.Positive(t, m.Latency.P50US, name)
		}
		require.True(t, m.Latency.Ordered(), "%s: %+v", name, m.Latency)
		require.InDelta(t, float64(m.Ops)/m.ElapsedSec, m.PerSec, 1e-6, name)
		// CPU is metered on every row: the servers always; the clients
		// apart from them on every API workload (commit's run inside).
		require.Empty(t, m.CPUError, name)
		require.NotNil(t, m.CPU, name)
		require.Positive(t, m.CPU.WallSec, name)
		require.Equal(t, 1, m.CPU.ServerProcs, name)
		if m.Workload == report.WorkloadCommit {
			require.Zero(t, m.CPU.ClientProcs, name)
		} else {
			require.Equal(t, 1, m.CPU.ClientProcs, name)
		}
	}
	for _, b := range suite.Backends() {
		for _, c := range levels {
			require.True(t, seen[fmt.Sprintf("commit/%s/badger/%d", b, c)], "commit/%s/badger/%d", b, c)
		}
	}
	for _, b := range suite.Backends() {
		for _, c := range levels {
			require.True(t, seen[fmt.Sprintf("commit/%s/%d", b, c)], "commit/%s/%d", b, c)
			require.True(t, seen[fmt.Sprintf("lock/%s/%d", b, c)], "lock/%s/%d", b, c)
			require.True(t, seen[fmt.Sprintf("keepalive/%s/%d", b, c)], "keepalive/%s/%d", b, c)
		}
		require.True(t, seen["handoff/"+b+"/2"], "handoff/%s/2", b)
		for _, w := range []string{report.WorkloadSharedKey, report.WorkloadExclusiveKey, report.WorkloadSemaphoreKey, report.WorkloadDistinctKeys} {
			require.True(t, seen[fmt.Sprintf("%s/%s/4", w, b)], "%s/%s/4", w, b)
		}
	}
	require.NotEmpty(t, rep.Elections, "elections counted around the API levels")
	for _, row := range rep.Summary.Rows {
		require.Equal(t, 1, row.Rounds)
		require.LessOrEqual(t, row.P50US, row.P99US)
		require.Equal(t, 1, row.CPURounds, "%s/%s/%d", row.Workload, row.System, row.Concurrency)
	}
	// The nodes and the clients did work: over all API rows together (one
	// row's 300 ms window on a loaded machine may fall under a 10 ms tick).
	var server, client float64
	for _, m := range rep.Measurements {
		if m.Workload != report.WorkloadCommit {
			server += m.CPU.ServerSec
			client += m.CPU.ClientSec
		}
	}
	require.Positive(t, server)
	require.Positive(t, client)
	require.Contains(t, stdout.String(), "srv CPU s/1k")
	require.NotEmpty(t, rep.Summary.Ratios.Backends, "etcd ÷ hashicorp ratios")
	require.NotEmpty(t, rep.Summary.Ratios.Floor, "commit p50 ÷ floor ratios")
	require.Len(t, rep.Summary.Ratios.Holding, len(suite.Backends())*len(report.HoldingPairs), "shared ÷ exclusive ratios")
	if peer {
		require.NotEmpty(t, rep.Summary.Ratios.Peer)
	}
}

// readOutputs reads the Markdown summary and the JSON report a run wrote
// into out.
func readOutputs(t *testing.T, out string) (string, *report.Report) {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(out, report.MarkdownFile))
	require.NoError(t, err)
	fh, err := os.Open(filepath.Join(out, report.JSONFile))
	require.NoError(t, err)
	defer fh.Close()
	rep, err := report.ReadJSON(fh)
	require.NoError(t, err)
	return string(md), rep
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-concurrency", "2, 8", "-backends", "etcd", "-workloads", "lock", "-mode", "open", "-rate", "500", "-peer=false", "-out", "x"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, []int{2, 8}, o.cfg.Concurrency)
	require.Equal(t, []string{"etcd"}, o.cfg.Backends)
	require.False(t, o.cfg.Commit)
	require.True(t, o.cfg.Lock)
	require.False(t, o.cfg.Peer)
	require.Equal(t, 500.0, o.cfg.Rate)
	require.Equal(t, "x", o.out)

	o, err = parseFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, []int{1, 16, 64, 256}, o.cfg.Concurrency)
	require.Equal(t, []string{"hashicorp", "etcd"}, o.cfg.Backends)
	require.Equal(t, []string{"wal", "badger"}, o.cfg.LogStores, "commit rows for every backend × log store")
	require.True(t, o.cfg.Commit && o.cfg.Lock && o.cfg.KeepAlive && o.cfg.Peer)
	require.Equal(t, 3, o.cfg.Rounds)
	require.True(t, o.cfg.Handoff && o.cfg.Snapshots && o.cfg.Failover, "the handoff, snapshots and failover measurements are on by default")
	require.Equal(t, []int{2, 8, 32}, o.cfg.HandoffConcurrency)
	require.True(t, strings.Contains(o.out, "results"), o.out)

	require.False(t, o.cfg.Shared, "the shared-locks benchmark is asked for by name, or by -quick")
	require.Nil(t, o.cfg.Scale, "the scale workload is asked for by name")

	o, err = parseFlags([]string{"-workloads", "scale", "-scale-steps", "200,500", "-scale-sessions", "2x5", "-scale-renewals", "0"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.NotNil(t, o.cfg.Scale)
	require.Equal(t, []int{200, 500}, o.cfg.Scale.Steps)
	require.Equal(t, 2, o.cfg.Scale.Sessions)
	require.Equal(t, 5, o.cfg.Scale.SessionLocks)
	require.Zero(t, o.cfg.Scale.Renewals)
	o, err = parseFlags([]string{"-workloads", "scale"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, []int{10_000, 100_000, 1_000_000}, o.cfg.Scale.Steps)
	require.Equal(t, 10_000, o.cfg.Scale.Sessions)
	require.Equal(t, 100, o.cfg.Scale.SessionLocks)
	require.Equal(t, 1_000_000, o.cfg.Scale.Renewals)
	require.Equal(t, []int{1, 16, 64}, o.cfg.SharedConcurrency)

	o, err = parseFlags([]string{"-workloads", "shared", "-shared-concurrency", "4,8"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.True(t, o.cfg.Shared)
	require.False(t, o.cfg.Lock || o.cfg.Handoff)
	require.Equal(t, []int{4, 8}, o.cfg.SharedConcurrency)

	o, err = parseFlags([]string{"-quick", "-rounds", "2"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, 2, o.cfg.Rounds, "an explicit flag wins over -quick")
	require.Equal(t, 500*time.Millisecond, o.cfg.Duration)
	require.Equal(t, 200*time.Millisecond, o.cfg.Warmup)
	require.True(t, o.cfg.Shared && o.cfg.Lock, "-quick adds the shared workload to the default ones")

	o, err = parseFlags([]string{"-quick", "-workloads", "lock"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.False(t, o.cfg.Shared, "explicit -workloads win over -quick")

	for _, bad := range [][]string{
		{"-workloads", "reads"}, {"-concurrency", "a"},
		{"-workloads", "scale", "-scale-steps", "500,200"}, {"-workloads", "scale", "-scale-sessions", "10x"}, {"-shared-concurrency", "0"}, {"-backends", "zk"}, {"-mode", "open"}, {"extra"},
	} {
		_, err := parseFlags(bad, &bytes.Buffer{})
		require.Error(t, err, bad)
	}
}

// TestSmokeScale runs the scale workload at a tiny size on both backends —
// steps of 200 and 500 locks, then 2 sessions × 5 locks added as a step of
// their own and 300 renewals after it — and checks that every figure of
// every step is measured,
// the promotion read from the new leader's log and the graceful transfer
// with its writers' counts included, and reported.
func TestSmokeScale(t *testing.T) {
	out := filepath.Join(t.TempDir(), "results")
	args := []string{
		"-workloads", "scale", "-scale-steps", "200,500", "-scale-sessions", "2x5", "-scale-renewals", "300",
		"-scale-kills", "1", "-scale-probe-ops", "20", "-scale-clients", "16",
		"-rounds", "1", "-peer=false", "-data-dir", t.TempDir(), "-out", out,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(ctx, args, &stdout, &stderr), stderr.String())
	require.Contains(t, stdout.String(), "scale (per node n1 / n2 / n3):")
	md, rep := readOutputs(t, out)
	require.Contains(t, md, "## Scale")
	require.Empty(t, rep.Notes, "no part may have failed")
	require.Empty(t, rep.Measurements, "only the scale workload ran")
	require.Len(t, rep.Scale, 3*len(suite.Backends()), "two exclusive steps and the sessions step per backend")
	require.Contains(t, md, "| 500 + 2 sessions × 5 = 510 |", "the sessions step is labelled with what its table holds")
	for _, st := range rep.Scale {
		name := fmt.Sprintf("%s at %s locks", st.System, st.Label())
		require.Empty(t, st.Errors, name)
		require.Positive(t, st.FillPerSec, name)
		require.Equal(t, 20, st.AcquireOps, name)
		require.Positive(t, st.AcquireP50US, name)
		require.LessOrEqual(t, st.AcquireP50US, st.AcquireP99US, name)
		require.Positive(t, st.SnapshotSaveMS, name)
		require.Positive(t, st.SnapshotBytes, name)
		require.Positive(t, st.RestoreMS, name)
		require.Positive(t, st.RestartReadyMS, name)
		require.Len(t, st.FailoverMS, 1, name)
		require.Positive(t, st.FailoverMS[0], name)
		require.Len(t, st.PromotionMS, 1, "%s: promotion read from the new leader's log", name)
		require.Len(t, st.TransferMS, 1, name)
		require.Positive(t, st.TransferMS[0], name)
		require.Positive(t, st.TransferWrites, "%s: writers ran through the transfer", name)
		require.GreaterOrEqual(t, st.TransferRefused, 0, name)
		require.GreaterOrEqual(t, st.PromotionMS[0], 0.0, name)
		require.Len(t, st.DataDirBytes, 3, name)
		require.Len(t, st.RSSBytes, 3, name)
		for i := range 3 {
			require.Positive(t, st.DataDirBytes[i], name)
			require.Positive(t, st.RSSBytes[i], name)
		}
		if st.SessionLocks > 0 {
			require.Equal(t, 500, st.Locks, name)
			require.Equal(t, 2, st.Sessions, name)
			require.Equal(t, 10, st.SessionLocks, name)
			require.Positive(t, st.SessionFillPerSec, name)
			require.Equal(t, 300, st.Renewals, name)
			require.Len(t, st.RenewedDataDirBytes, 3, name)
		} else {
			require.Zero(t, st.Sessions, name)
			require.Zero(t, st.Renewals, name)
		}
	}
	measured := 0
	for _, a := range rep.Summary.Aims {
		if strings.HasPrefix(a.Name, "scale: ") && a.Measured {
			measured++
		}
	}
	require.Equal(t, 11*len(suite.Backends()), measured, "every scale aim measured on every backend")
}
