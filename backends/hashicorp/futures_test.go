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

// TestCancelledProposalsLeakNoGoroutines: Propose hands its entry to
// hashicorp and waits for the future, which the node's one applyWaiter
// goroutine awaits for it (futures cannot be selected on,
// applywait.go); a Propose whose ctx ends returns at once, leaving its
// future queued there until it resolves. The test shows that the futures
// are really left pending (so it can see a leak), that they do not cost a
// goroutine each, and that they all resolve and the waiter exits: a
// leader cut off from its followers cannot commit them, steps down
// (LeaderLeaseTimeout), and hashicorp fails every pending future with
// ErrLeadershipLost. Close's grace period and goleak in TestMain cover the
// futures still pending at shutdown.
func TestCancelledProposalsLeakNoGoroutines(t *testing.T) {
	var mu sync.Mutex
	nodes := map[string]*Node{}
	c := backendtest.NewCluster(t, func(cfg backends.Config) (backendtest.Node, error) {
		nd, err := New(cfg)
		if err == nil {
			mu.Lock()
			nodes[cfg.ID] = nd
			mu.Unlock()
		}
		return nd, err
	})
	c.Start(3)
	l := c.WaitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), backendtest.WaitTimeout)
	defer cancel()
	if _, err := l.Node().Propose(ctx, core.Grant("warm", 1000, "o")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	n := nodes[l.ID]
	mu.Unlock()
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
	// The cancelled callers have returned; their futures are still pending,
	// awaited by one goroutine, not one each.
	pending := n.applies.unresolved.Load()
	if pending < proposals/2 {
		t.Fatalf("only %d futures pending right after the cancellations, want about %d", pending, proposals)
	}
	if extra := runtime.NumGoroutine() - baseline; extra > proposals/4 {
		t.Fatalf("%d goroutines above the baseline for %d pending futures, want one awaiting them all", extra, pending)
	}
	t.Logf("%d futures pending after the cancellations", pending)
	// Every future resolves once the leader steps down; the waiter then
	// exits.
	deadline := time.Now().Add(backendtest.WaitTimeout)
	for {
		g := settledGoroutines()
		if g <= baseline+5 && n.applies.unresolved.Load() == 0 {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, baseline %d, %d futures unresolved: cancelled proposals left goroutines behind:\n%s",
				g, baseline, n.applies.unresolved.Load(), buf[:runtime.Stack(buf, true)])
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
