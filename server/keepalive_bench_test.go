package server_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// BenchmarkKeepAlive measures session KeepAlives through the real Connect
// API on an in-process three-node hashicorp cluster: 1, 16 and 64 sessions,
// each holding 10 locks and kept alive in a loop by a client of its own (one
// KeepAlive renews all ten). It reports keep-alives/s, the KeepAlive p99,
// goroutines started per KeepAlive, the leader's entries per durable log
// append (concurrent KeepAlives of different sessions sharing one fsync)
// and its log entries per KeepAlive (below 1 when they share entries:
// server/renewbatch.go).
func BenchmarkKeepAlive(b *testing.B) {
	c := nodetest.Start(b, 3)
	benchKeepAlives(b, c.Leader(b))
}

// BenchmarkKeepAliveEtcd is BenchmarkKeepAlive on the etcd raft backend.
func BenchmarkKeepAliveEtcd(b *testing.B) {
	c := nodetest.Start(b, 3, nodetest.WithBackend(config.BackendEtcd))
	benchKeepAlives(b, c.Leader(b))
}

// BenchmarkKeepAliveMem is BenchmarkKeepAlive over the in-memory consensus
// stand-in: the API layer's cost of a KeepAlive alone.
func BenchmarkKeepAliveMem(b *testing.B) {
	in, _ := memNode(b)
	benchKeepAlives(b, in)
}

func benchKeepAlives(b *testing.B, leader *nodetest.Instance) {
	const locksPerSession = 10
	// KeepAlives share entries once the leader has heard every member say
	// it applies them (server/commandversion.go).
	eventually(b, func() bool { return nodetest.Metric(b, leader.Addr, "ticketd_cluster_command_version") >= 4 },
		"the leader's cluster command version")
	for _, clients := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("sessions=%d", clients), func(b *testing.B) {
			ctx := context.Background()
			locks := make([]ticketv1connect.LockServiceClient, clients)
			sessions := make([]uint64, clients)
			for w := range clients {
				hc := nodetest.H2CClient()
				defer hc.CloseIdleConnections()
				locks[w] = ticketv1connect.NewLockServiceClient(hc, "http://"+leader.Addr)
				s, err := locks[w].CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 30_000})
				if err != nil {
					b.Fatal(err)
				}
				sessions[w] = s.GetSession()
				for k := range locksPerSession {
					key := fmt.Sprintf("bench/keepalive/%d/%d/%d", b.N, w, k)
					if _, err := locks[w].Acquire(ctx, &ticketv1.AcquireRequest{Key: key, Owner: key, Session: sessions[w]}); err != nil {
						b.Fatal(err)
					}
				}
			}
			defer func() {
				for w := range clients {
					_, _ = locks[w].CloseSession(ctx, &ticketv1.CloseSessionRequest{Session: sessions[w]})
				}
			}()
			var next, failed atomic.Int64
			lat := make([][]time.Duration, clients)
			var wg sync.WaitGroup
			entries0, appends0 := logAppends(b, leader)
			created0 := goroutinesCreated()
			b.ResetTimer()
			start := time.Now()
			for w := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						t0 := time.Now()
						_, err := locks[w].KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: sessions[w]})
						lat[w] = append(lat[w], time.Since(t0))
						if err != nil && failed.Add(1) < 4 {
							b.Logf("keep-alive: %v", err)
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d calls failed", n)
			}
			all := slices.Concat(lat...)
			slices.Sort(all)
			b.ReportMetric(float64(all[min(len(all)-1, int(0.99*float64(len(all))))].Microseconds())/1000, "keepalive-p99-ms")
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "keepalives/s")
			b.ReportMetric(float64(goroutinesCreated()-created0)/float64(b.N), "goroutines/keepalive")
			if entries, appends := logAppends(b, leader); appends > appends0 {
				b.ReportMetric((entries-entries0)/(appends-appends0), "entries/append")
				// Log entries written per KeepAlive: 1 when each has its
				// own, less when renewals share a RenewBatch entry.
				b.ReportMetric((entries-entries0)/float64(b.N), "entries/keepalive")
			}
		})
	}
}
