package backendtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
)

// BenchmarkCommit measures the commit latency and throughput of the backend
// that open makes, on a three-node loopback cluster on disk (in the log
// store open's Config names: WithLogStore), at 1 and 64 concurrent proposers (sub-benchmarks
// "proposers=1" and "proposers=64"). Each op is a Grant and then a Release of
// a distinct key on the leader, so two commits. It reports the p50 and p99
// latency of one commit in microseconds ("p50-µs", "p99-µs") and commits per
// second ("commits/s"). Both backends call it from their own BenchmarkCommit,
// so their figures come from one harness and compare directly.
//
// The nodes run without an OnApply hook: the figures are the backend's, not
// the harness's bookkeeping. A failed proposal fails the benchmark.
func BenchmarkCommit(b *testing.B, open Factory) {
	for _, proposers := range []int{1, 64} {
		b.Run(fmt.Sprintf("proposers=%d", proposers), func(b *testing.B) {
			benchCommit(b, open, proposers)
		})
	}
}

func benchCommit(b *testing.B, open Factory, proposers int) {
	c := NewCluster(b, open)
	c.Tune = func(cfg *backends.Config) { cfg.OnApply = nil }
	c.Start(3)
	n := c.WaitLeader().Node()
	ctx := context.Background()
	lat := make([][]time.Duration, proposers)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range proposers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				key := fmt.Sprintf("bench/%d", i)
				t0 := time.Now()
				res, err := n.Propose(ctx, core.Grant(key, 10_000, "bench"))
				t1 := time.Now()
				if err == nil {
					_, err = n.Propose(ctx, core.Release(key, res.Token))
				}
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				lat[w] = append(lat[w], t1.Sub(t0), time.Since(t1))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if p := failed.Load(); p != nil {
		b.Fatal(*p)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(p float64) float64 {
		return float64(all[int(p*float64(len(all)-1))]) / float64(time.Microsecond)
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "commits/s")
}

// AppendStall measures how appends fare while a compaction runs, the shape
// of the stall chunked compaction avoids (a snapshot's compaction deleting ~8k
// entries in one badger write while appends queue behind it). For each of b.N
// rounds it calls setup (unmeasured: refill the log), then calls appendOne
// in a loop on another goroutine, recording each call's latency, while
// during runs on the calling goroutine, and until at least minAppends calls
// of the round are done. It reports the appends' p50, p99 and maximum over
// all rounds in microseconds as custom metrics "append-p50-µs",
// "append-p99-µs" and "append-max-µs" of b; a run whose during does
// nothing gives the baseline to divide by. Errors from any function fail b.
// appendOne and during must be safe to run concurrently with each other.
func AppendStall(b *testing.B, minAppends int, appendOne, setup, during func() error) {
	b.Helper()
	var lat []time.Duration
	for range b.N {
		b.StopTimer()
		if err := setup(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var (
			appErr  error
			stop    atomic.Bool
			wg      sync.WaitGroup
			once    sync.Once
			started = make(chan struct{})
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer once.Do(func() { close(started) })
			for i := 0; !stop.Load() || i < minAppends; i++ {
				t0 := time.Now()
				if err := appendOne(); err != nil {
					appErr = err
					return
				}
				lat = append(lat, time.Since(t0))
				once.Do(func() { close(started) })
			}
		}()
		<-started
		err := during()
		stop.Store(true)
		wg.Wait()
		if err != nil {
			b.Fatal(err)
		}
		if appErr != nil {
			b.Fatal(appErr)
		}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Microsecond)
	}
	b.ReportMetric(pct(0.50), "append-p50-µs")
	b.ReportMetric(pct(0.99), "append-p99-µs")
	b.ReportMetric(pct(1), "append-max-µs")
}

// Repeat returns a function that calls f n times and stops at its first
// error: an AppendStall setup that refills the log with n batches.
func Repeat(n int, f func() error) func() error {
	return func() error {
		for range n {
			if err := f(); err != nil {
				return err
			}
		}
		return nil
	}
}
