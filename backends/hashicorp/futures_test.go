package hashicorp

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/core"
)

// TestCancelledProposalsLeakNoGoroutines: Propose
// waits for a hashicorp future on a goroutine of its own (futures cannot be
// selected on), and returns at once when its ctx ends, leaving that
// goroutine behind until the future resolves. The test shows that the
// goroutines are really left behind (so it can see a leak), and that they
// all exit once the futures resolve: a leader cut off from its followers
// cannot commit them, steps down (LeaderLeaseTimeout), and hashicorp fails
// every pending future with ErrLeadershipLost. Close's grace period and
// goleak in TestMain cover the futures still pending at shutdown.
func TestCancelledProposalsLeakNoGoroutines(t *testing.T) {
	c := backendtest.NewCluster(t, func(cfg backends.Config) (backendtest.Node, error) { return New(cfg) })
	c.Start(3)
	l := c.WaitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), backendtest.WaitTimeout)
	defer cancel()
	if _, err := l.Node().Propose(ctx, core.Grant("warm", 1000, "o")); err != nil {
		t.Fatal(err)
	}
	baseline := settledGoroutines()

	c.Partition(l)
	const proposals = 100
	var wg sync.WaitGroup
	for i := 0; i < proposals; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, pcancel := context.WithCancel(ctx)
			go func() { time.Sleep(time.Millisecond); pcancel() }()
			_, err := l.Node().Propose(pctx, core.Grant(fmt.Sprintf("k%03d", i), 1000, "o"))
			if err == nil {
				t.Errorf("proposal %d committed on a partitioned leader", i)
			} else if !errors.Is(err, context.Canceled) && !errors.Is(err, core.ErrNotLeader) {
				t.Errorf("proposal %d: %v, want a ctx or not-leader error", i, err)
			}
		}()
	}
	wg.Wait()
	// The cancelled callers have returned; their futures are still pending.
	if pending := runtime.NumGoroutine() - baseline; pending < proposals/2 {
		t.Fatalf("only %d goroutines above the baseline right after the cancellations, want about %d waiting on futures", pending, proposals)
	} else {
		t.Logf("%d goroutines waiting on futures after the cancellations", pending)
	}
	// Every future resolves once the leader steps down; its waiting
	// goroutine then exits.
	deadline := time.Now().Add(backendtest.WaitTimeout)
	for {
		n := settledGoroutines()
		if n <= baseline+5 {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, baseline %d: cancelled proposals left goroutines behind:\n%s",
				n, baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.Heal()
	c.WaitLeader()
}

// settledGoroutines counts goroutines after letting short-lived ones finish.
func settledGoroutines() int {
	for i := 0; i < 10; i++ {
		runtime.Gosched()
	}
	time.Sleep(20 * time.Millisecond)
	return runtime.NumGoroutine()
}
