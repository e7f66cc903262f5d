package report_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/cputime"
	"github.com/ticketd/ticketd/bench/report"
)

// withCPU is m with the window's CPU: server and client seconds, clients
// in a process of their own unless client is negative.
func withCPU(ms report.Measurement, server, client float64) report.Measurement {
	u := &cputime.Usage{WallSec: 1, ServerSec: server, ServerProcs: 1}
	if client >= 0 {
		u.ClientSec, u.ClientProcs = client, 1
	}
	ms.CPU = u
	return ms
}

// cpuMeteredRun is a run with what the CPU aims measure: lock rows of both backends
// and etcd Mutex with CPU metered, keepalive rows of one backend and etcd.
func cpuMeteredRun() *report.Report {
	const (
		L, K, C    = report.WorkloadLock, report.WorkloadKeepAlive, report.WorkloadCommit
		Hc, Et     = report.SystemHashicorp, report.SystemEtcd
		Mu, KA     = report.SystemEtcdMutex, report.SystemEtcdKeepAlive
		rounds     = 3
		opsPerRnd  = 1000
		serverSec1 = 0.2 // round 1's etcd-backend server CPU at 64: 0.2 s per 1,000
	)
	r := &report.Report{}
	for round := 1; round <= rounds; round++ {
		d := float64(round - 2) // -1, 0, +1 around the median
		r.Measurements = append(r.Measurements,
			// 1 client: hashicorp 1.6× (held ≥ 1.5), etcd 0.9× (other backend, missed ≥ 1).
			withCPU(m(round, L, Hc, 1, opsPerRnd, 1600, 1, 1), 1, 0.2),
			withCPU(m(round, L, Et, 1, opsPerRnd, 900, 1, 1), 1, 0.2),
			withCPU(m(round, L, Mu, 1, opsPerRnd, 1000, 1, 1), 1, 0.3),
			// 64 clients: etcd backend 2.5×, hashicorp 1.2× (held ≥ 1);
			// server CPU per 1,000 cycles: hashicorp 0.3 s, etcd 0.2 s
			// (median of 0.1, 0.2, 0.3 s), etcd Mutex 0.5 s: best 0.4×.
			withCPU(m(round, L, Hc, 64, opsPerRnd, 1200, 1, 1), 0.3, 0.1),
			withCPU(m(round, L, Et, 64, opsPerRnd, 2500, 1, 1), serverSec1+0.1*d, 0.1),
			withCPU(m(round, L, Mu, 64, opsPerRnd, 1000, 1, 1), 0.5, 0.1),
			// keepalive at 64: 3000/s ÷ 2000/s.
			withCPU(m(round, K, Hc, 64, opsPerRnd, 3000, 1, 1), 0.1, 0.05),
			withCPU(m(round, K, KA, 64, opsPerRnd, 2000, 1, 1), 0.02, 0.02),
			// commit: clients inside the server process.
			withCPU(m(round, C, Hc, 64, opsPerRnd, 5000, 1, 1), 0.4, -1),
		)
	}
	r.Summarize()
	return r
}

func TestRowsCarryCPUPer1k(t *testing.T) {
	s := cpuMeteredRun().Summary
	et, ok := s.Find(report.WorkloadLock, report.SystemEtcd, 64)
	require.True(t, ok)
	require.InDelta(t, 0.2, et.ServerCPUPer1k, 1e-9, "median over rounds of CPU ÷ ops × 1000")
	require.InDelta(t, 0.1, et.ClientCPUPer1k, 1e-9)
	require.Equal(t, 3, et.CPURounds)
	c, ok := s.Find(report.WorkloadCommit, report.SystemHashicorp, 64)
	require.True(t, ok)
	require.InDelta(t, 0.4, c.ServerCPUPer1k, 1e-9)
	require.Zero(t, c.ClientCPUPer1k, "no client process: no client figure")

	var lock64 []report.PeerRatio
	for _, pr := range s.Ratios.Peer {
		if pr.Workload == report.WorkloadLock && pr.Concurrency == 64 {
			lock64 = append(lock64, pr)
		}
	}
	require.Len(t, lock64, 2)
	for _, pr := range lock64 {
		want := map[string]float64{report.SystemHashicorp: 0.3 / 0.5, report.SystemEtcd: 0.2 / 0.5}[pr.System]
		require.InDelta(t, want, pr.ServerCPU, 1e-9, pr.System)
	}

	var table, md bytes.Buffer
	r := cpuMeteredRun()
	require.NoError(t, r.WriteTable(&table))
	require.NoError(t, r.WriteMarkdown(&md))
	require.Contains(t, table.String(), "srv CPU s/1k")
	require.Contains(t, table.String(), "0.200") // etcd backend's server CPU at 64
	require.Contains(t, md.String(), "server CPU s / 1k ops")
	require.Contains(t, md.String(), "Session keep-alives ÷ etcd LeaseKeepAlive")
}

func TestAimsIssue33(t *testing.T) {
	got := requireAims(t, cpuMeteredRun().Summary.Aims, []aimCase{
		{"lock cycles/s vs etcd Mutex at 1 client", true, 1.6},
		{"lock cycles/s vs etcd Mutex at 64 clients", true, 2.5},
		{"lock cycles/s vs etcd Mutex at 1 client, other backend", false, 0.9},
		{"lock cycles/s vs etcd Mutex at 64 clients, other backend", true, 1.2},
		{"server CPU per 1,000 lock cycles vs etcd Mutex at 64 clients", true, 0.4},
		{"session keep-alives/s (10 locks each) vs etcd LeaseKeepAlive (10 keys each) at 64 clients", true, 1.5},
	})
	require.False(t, got["lock cycles/s vs etcd Mutex at 16 clients, other backend"].Measured, "every target is listed")

	// Without the etcd peer's CPU, the CPU aim is not measured.
	r := cpuMeteredRun()
	for i := range r.Measurements {
		if r.Measurements[i].System == report.SystemEtcdMutex {
			r.Measurements[i].CPU = nil
		}
	}
	r.Summarize()
	for _, a := range r.Summary.Aims {
		if a.Name == "server CPU per 1,000 lock cycles vs etcd Mutex at 64 clients" {
			require.False(t, a.Measured)
		}
	}
}
