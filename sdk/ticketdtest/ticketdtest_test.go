package ticketdtest_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

func backend() string {
	if b := os.Getenv("TICKETDTEST_BACKEND"); b != "" {
		return b
	}
	return "hashicorp"
}

// TestFaults exercises every process fault the package offers on a real
// three-node cluster.
func TestFaults(t *testing.T) {
	c := ticketdtest.Start(t, ticketdtest.Options{Backend: backend(), Args: []string{"--raft-election-timeout-ms=500", "--raft-heartbeat-ms=50"}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	l := c.Leader(t)
	res, err := c.Lock(l).Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 30_000})
	if err != nil {
		t.Fatal(err)
	}
	pid := c.Node(l).PID()
	if pid == 0 {
		t.Fatal("leader has no pid")
	}
	if v, err := c.Metric(l, "ticketd_is_leader"); err != nil || v != 1 {
		t.Fatalf("leader's ticketd_is_leader = %v, %v; want 1", v, err)
	}
	if v, err := c.Metric(l, "ticketd_locks_held"); err != nil || v != 1 {
		t.Fatalf("ticketd_locks_held = %v, %v; want 1", v, err)
	}
	if _, err := c.Metric(l, "ticketd_no_such_metric"); !errors.Is(err, ticketdtest.ErrNoMetric) {
		t.Fatalf("unknown metric: %v, want ErrNoMetric", err)
	}

	c.Kill(l)
	if c.Node(l).Running() {
		t.Fatal("killed node still running")
	}
	nl := c.WaitLeader(t, 20*time.Second)
	if nl == l {
		t.Fatal("the killed node leads")
	}
	got, err := c.Lock(nl).GetLock(ctx, &ticketv1.GetLockRequest{Key: "k"})
	if err != nil || got.GetToken() != res.GetToken() {
		t.Fatalf("after failover: %v %v", got, err)
	}

	c.Restart(l)
	if c.Node(l).PID() == pid || !c.Node(l).Running() {
		t.Fatal("restart did not start a new process")
	}
	f := (nl + 1) % c.Len()
	if f == l {
		f = (f + 1) % c.Len()
	}
	c.Stop(f)
	if len(c.Running()) != c.Len()-1 {
		t.Fatalf("running: %v", c.Running())
	}
	c.Cont(f)
	c.WaitLeader(t, 20*time.Second)
	if len(c.Running()) != c.Len() {
		t.Fatalf("running after Cont and Restart: %v", c.Running())
	}
}
