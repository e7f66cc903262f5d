package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// BenchmarkAcquireRelease measures Acquire+Release cycles through the real
// Connect API (HTTP/2, proto) against the leader of an in-process
// three-node hashicorp cluster (badger with SyncWrites, loopback TCP), at 1
// and 64 concurrent clients, each on its own keys. It reports the Acquire
// latency percentiles and the cycle and acquire rates.
func BenchmarkAcquireRelease(b *testing.B) {
	c := nodetest.Start(b, 3)
	benchCycles(b, c.Leader(b))
}

// BenchmarkAcquireReleaseEtcd is BenchmarkAcquireRelease on the etcd raft
// backend: the same API path over the other consensus engine, so the two
// backends' lock throughput through the API compares in one run.
func BenchmarkAcquireReleaseEtcd(b *testing.B) {
	c := nodetest.Start(b, 3, nodetest.WithBackend(config.BackendEtcd))
	benchCycles(b, c.Leader(b))
}

// BenchmarkAcquireReleaseMem is BenchmarkAcquireRelease over the in-memory
// consensus stand-in: the cost of the API layer alone (HTTP/2, connect, the
// server's queues and lessor), without disks or replication.
func BenchmarkAcquireReleaseMem(b *testing.B) {
	in, _ := memNode(b)
	benchCycles(b, in)
}

// BenchmarkAcquireShared is BenchmarkAcquireRelease with every client on
// ONE key in MODE_SHARED: shared holders coexist, so the cycles
// of 1, 16 and 64 clients never wait for each other, and the figures read
// beside BenchmarkAcquireRelease's (each client on keys of its own) give
// the cost of sharing one key. The "exclusive" sub-benchmarks run the same
// one-key loop exclusively with wait=true, on the same cluster: the ratio
// of the two at one client count is shared ÷ exclusive on one key.
func BenchmarkAcquireShared(b *testing.B) {
	c := nodetest.Start(b, 3)
	benchShared(b, c.Leader(b))
}

// BenchmarkAcquireSharedEtcd is BenchmarkAcquireShared on the etcd raft
// backend.
func BenchmarkAcquireSharedEtcd(b *testing.B) {
	c := nodetest.Start(b, 3, nodetest.WithBackend(config.BackendEtcd))
	benchShared(b, c.Leader(b))
}

func benchShared(b *testing.B, leader *nodetest.Instance) {
	for _, mode := range []ticketv1.Mode{ticketv1.Mode_MODE_SHARED, ticketv1.Mode_MODE_EXCLUSIVE} {
		name := "shared"
		if mode == ticketv1.Mode_MODE_EXCLUSIVE {
			name = "exclusive"
		}
		b.Run(name, func(b *testing.B) {
			benchCyclesOf(b, leader, []int{1, 16, 64}, func(w int, i int64) *ticketv1.AcquireRequest {
				return &ticketv1.AcquireRequest{
					Key: "bench/one-key/" + name, LeaseMs: 30_000, Owner: fmt.Sprintf("bench/%s/%d/%d", name, w, i),
					Mode: mode, Wait: true,
				}
			})
		})
	}
}

func benchCycles(b *testing.B, leader *nodetest.Instance) {
	benchCyclesOf(b, leader, []int{1, 64}, func(w int, i int64) *ticketv1.AcquireRequest {
		key := fmt.Sprintf("bench/%d/%d", w, i)
		return &ticketv1.AcquireRequest{Key: key, LeaseMs: 30_000, Owner: key}
	})
}

// benchCyclesOf runs b.N Acquire+Release cycles from each number of
// clients in levels, cycle i of client w acquiring request(w, i).
func benchCyclesOf(b *testing.B, leader *nodetest.Instance, levels []int, request func(w int, i int64) *ticketv1.AcquireRequest) {
	for _, clients := range levels {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			ctx := context.Background()
			var next atomic.Int64
			lat := make([][]time.Duration, clients)
			entries0, appends0 := logAppends(b, leader)
			created0 := goroutinesCreated()
			var failed atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for w := range clients {
				// Each client has its own connection, as separate client
				// processes would (one shared HTTP/2 connection would make
				// its single frame loop the bottleneck).
				hc := nodetest.H2CClient()
				defer hc.CloseIdleConnections()
				lock := ticketv1connect.NewLockServiceClient(hc, "http://"+leader.Addr)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						req := request(w, i)
						t0 := time.Now()
						res, err := lock.Acquire(ctx, req)
						lat[w] = append(lat[w], time.Since(t0))
						if err != nil {
							if failed.Add(1) < 4 {
								b.Logf("acquire: %v", err)
							}
							continue
						}
						if _, err := lock.Release(ctx, &ticketv1.ReleaseRequest{Key: req.GetKey(), Token: res.GetToken()}); err != nil {
							if failed.Add(1) < 4 {
								b.Logf("release: %v", err)
							}
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
			pct := func(p float64) float64 {
				return float64(all[min(len(all)-1, int(p*float64(len(all))))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "acquire-p50-ms")
			b.ReportMetric(pct(0.99), "acquire-p99-ms")
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cycles/s")
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acquires/s")
			// Every goroutine the process started (the three nodes and the
			// clients), per cycle: per-request goroutines show here, whatever
			// the machine's load.
			b.ReportMetric(float64(goroutinesCreated()-created0)/float64(b.N), "goroutines/cycle")
			if entries, appends := logAppends(b, leader); appends > appends0 {
				// Group commit: the entries of concurrent proposals that
				// share one durable append (one fsync) on the leader.
				b.ReportMetric((entries-entries0)/(appends-appends0), "entries/append")
			}
		})
	}
}

// goroutinesCreated is how many goroutines this process has started
// (runtime/metrics /sched/goroutines-created:goroutines).
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// logAppends reads the leader's durable log appends and the entries they
// wrote from its /metrics (ticketd_log_append_duration_seconds_count and
// ticketd_log_appended_entries_total); zeros when the node has no log (the
// in-memory stand-in).
func logAppends(b *testing.B, leader *nodetest.Instance) (entries, appends float64) {
	b.Helper()
	res, err := http.Get("http://" + leader.Addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		name, value, _ := strings.Cut(sc.Text(), " ")
		v, _ := strconv.ParseFloat(value, 64)
		switch name {
		case "ticketd_log_appended_entries_total":
			entries = v
		case "ticketd_log_append_duration_seconds_count":
			appends = v
		}
	}
	return entries, appends
}

// BenchmarkHandoff measures contended handoffs through the real Connect API
// on an in-process three-node hashicorp cluster: N clients on one hot key,
// each looping Acquire-with-wait then Release (docs/design.md#handoff). One
// handoff is one granted Acquire. It reports handoffs/s, the leader's log
// index growth per handoff (entries/handoff: 2.00 is one Release and one
// Grant; more means rejected grants), and the handoff latency p50: from a
// Release returning to the next holder's Acquire returning, negative when
// the Acquire's answer overtook the Release's.
func BenchmarkHandoff(b *testing.B) {
	c := nodetest.Start(b, 3)
	leader := c.Leader(b)
	for _, clients := range []int{2, 8, 32} {
		b.Run(fmt.Sprintf("waiters=%d", clients), func(b *testing.B) {
			benchHandoff(b, leader, clients)
		})
	}
}

func benchHandoff(b *testing.B, leader *nodetest.Instance, clients int) {
	ctx := context.Background()
	key := fmt.Sprintf("hot/%d/%d", clients, b.N)
	commitIndex := func() uint64 {
		st, err := leader.Cluster.Status(ctx, &ticketv1.StatusRequest{})
		if err != nil {
			b.Fatal(err)
		}
		return st.GetCommitIndex()
	}
	var (
		next      atomic.Int64
		failed    atomic.Int64
		wg        sync.WaitGroup
		mu        sync.Mutex
		released  time.Time // when the latest Release returned
		handoffMS []float64
	)
	b.ResetTimer()
	startIndex := commitIndex()
	start := time.Now()
	for w := range clients {
		hc := nodetest.H2CClient()
		defer hc.CloseIdleConnections()
		lock := ticketv1connect.NewLockServiceClient(hc, "http://"+leader.Addr)
		owner := fmt.Sprintf("%s/client-%d", key, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				res, err := lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: 30_000, Owner: owner, Wait: true})
				got := time.Now()
				if err != nil {
					failed.Add(1)
					continue
				}
				mu.Lock()
				if !released.IsZero() {
					handoffMS = append(handoffMS, float64(got.Sub(released).Microseconds())/1000)
				}
				mu.Unlock()
				if _, err := lock.Release(ctx, &ticketv1.ReleaseRequest{Key: key, Token: res.GetToken()}); err != nil {
					failed.Add(1)
					continue
				}
				mu.Lock()
				released = time.Now()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d calls failed", n)
	}
	growth := float64(commitIndex()-startIndex) / float64(b.N)
	slices.Sort(handoffMS)
	if len(handoffMS) > 0 {
		b.ReportMetric(handoffMS[len(handoffMS)/2], "handoff-p50-ms")
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "handoffs/s")
	b.ReportMetric(growth, "entries/handoff")
}
