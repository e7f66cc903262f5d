//go:build faults

package harness_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/ticketdtest"

	"github.com/ticketd/ticketd/faults/harness"
)

// Regression tests pinning scenarios the fault-injection runs found. Each
// drives the scenario directly, a few times (it is a race against the
// resumed node learning it was deposed), for each backend.

const regressIterations = 4

func startRegressCluster(t *testing.T, backend string) *ticketdtest.Cluster {
	t.Helper()
	return harness.StartCluster(t, backend, 3, 500*time.Millisecond, "")
}

// callAfterResume sends call to the paused node l, resumes l while the
// request waits in its socket, and returns the call's error.
func callAfterResume(c *ticketdtest.Cluster, l int, call func(ctx context.Context) error) error {
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		errc <- call(ctx)
	}()
	time.Sleep(300 * time.Millisecond) // the request reaches the paused node
	c.Cont(l)
	return <-errc
}

// TestRegressionStaleRenewRefusal pins the violation found by `-backend=etcd
// -seed=3` (pause-leader-lease): a Renew that reaches a leader paused for
// longer than a lease is answered NotFound when it resumes, for a lock the
// new leader granted meanwhile and still holds — the resumed node refuses
// from its stale table before confirming it still leads. Renew must answer
// OK (renewed through the leader) or Unavailable, never NotFound, for a lock
// that is held.
func TestRegressionStaleRenewRefusal(t *testing.T) {
	for _, b := range backends() {
		t.Run(b, func(t *testing.T) {
			c := startRegressCluster(t, b)
			for i := range regressIterations {
				l := c.Leader(t)
				c.Stop(l)
				nl := c.WaitLeader(t, 30*time.Second)
				key := fmt.Sprintf("regress/renew/%d", i)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				res, err := c.Lock(nl).Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: 60_000, Owner: "holder"})
				cancel()
				if err != nil {
					t.Fatalf("acquire through the new leader: %v", err)
				}
				err = callAfterResume(c, l, func(ctx context.Context) error {
					_, err := c.Lock(l).Renew(ctx, &ticketv1.RenewRequest{Key: key, Token: res.GetToken()})
					return err
				})
				if connect.CodeOf(err) == connect.CodeNotFound {
					t.Errorf("iteration %d: renew of held token %d sent to the resumed old leader %s: %v (want OK or Unavailable)",
						i, res.GetToken(), c.Node(l).ID, err)
				}
				c.WaitLeader(t, 30*time.Second)
			}
		})
	}
}

// TestRegressionStaleAlreadyExists: the same stale table answering an
// Acquire: a key released through the new leader while the old one was
// paused must not be refused AlreadyExists by the resumed old leader.
func TestRegressionStaleAlreadyExists(t *testing.T) {
	for _, b := range backends() {
		t.Run(b, func(t *testing.T) {
			c := startRegressCluster(t, b)
			for i := range regressIterations {
				key := fmt.Sprintf("regress/acquire/%d", i)
				l := c.Leader(t)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				res, err := c.Lock(l).Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: 60_000, Owner: "first"})
				cancel()
				if err != nil {
					t.Fatalf("acquire: %v", err)
				}
				c.Stop(l)
				nl := c.WaitLeader(t, 30*time.Second)
				ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
				_, err = c.Lock(nl).Release(ctx, &ticketv1.ReleaseRequest{Key: key, Token: res.GetToken()})
				cancel()
				if err != nil {
					t.Fatalf("release through the new leader: %v", err)
				}
				err = callAfterResume(c, l, func(ctx context.Context) error {
					_, err := c.Lock(l).Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: 60_000, Owner: "second"})
					return err
				})
				if connect.CodeOf(err) == connect.CodeAlreadyExists {
					t.Errorf("iteration %d: acquire of a released key sent to the resumed old leader %s: %v (want OK or Unavailable)",
						i, c.Node(l).ID, err)
				}
				c.WaitLeader(t, 30*time.Second)
			}
		})
	}
}
