//go:build linux && faults

package hosts_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"

	"github.com/ticketd/ticketd/faults/check"
	"github.com/ticketd/ticketd/faults/history"
	"github.com/ticketd/ticketd/faults/hosts"
)

// callTimeout bounds every recorded call (see recorder.timeout).
const callTimeout = 2 * time.Second

// recorder makes calls to chosen nodes of a host cluster, one at a time,
// and records them (package history) for the checkers.
type recorder struct {
	c   *hosts.Cluster
	rec *history.Recorder
	id  int // the client id of the calls: one call at a time per id
	// timeout bounds each call; callTimeout when zero.
	timeout time.Duration
}

func newRecorder(c *hosts.Cluster) *recorder { return &recorder{c: c, rec: history.NewRecorder()} }

// impatient returns r with calls bounded by d (for calls expected to
// hang, such as writes through a leader cut from its peers).
func (r *recorder) impatient(d time.Duration) *recorder {
	cp := *r
	cp.timeout = d
	return &cp
}

// client returns a recorder sharing r's history whose calls carry client
// id (for a goroutine of its own).
func (r *recorder) client(id int) *recorder { return &recorder{c: r.c, rec: r.rec, id: id} }

func (r *recorder) call(node int, op history.Op, fn func(ctx context.Context, op *history.Op) error) history.Op {
	op.Client, op.Node, op.NodeID = r.id, node, r.c.Node(node).ID
	op = r.rec.Invoke(op)
	timeout := r.timeout
	if timeout == 0 {
		timeout = callTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err := fn(ctx, &op)
	cancel()
	op.Outcome, op.Code = history.Classify(op.Kind, err)
	if op.Outcome != history.OK && op.Kind == history.Acquire {
		op.Token = 0
	}
	r.rec.Complete(op)
	return op
}

func (r *recorder) acquire(node int, key, owner string, leaseMS int64) history.Op {
	op := history.Op{Kind: history.Acquire, Key: key, Owner: owner, LeaseMS: leaseMS}
	return r.call(node, op, func(ctx context.Context, op *history.Op) error {
		res, err := r.c.Lock(node).Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: leaseMS, Owner: owner})
		if err == nil {
			op.Token, op.ResLeaseMS = res.GetToken(), res.GetLeaseMs()
		}
		return err
	})
}

func (r *recorder) release(node int, key string, token uint64) history.Op {
	return r.call(node, history.Op{Kind: history.Release, Key: key, Token: token}, func(ctx context.Context, _ *history.Op) error {
		_, err := r.c.Lock(node).Release(ctx, &ticketv1.ReleaseRequest{Key: key, Token: token})
		return err
	})
}

func (r *recorder) renew(node int, key string, token uint64) history.Op {
	return r.call(node, history.Op{Kind: history.Renew, Key: key, Token: token}, func(ctx context.Context, op *history.Op) error {
		res, err := r.c.Lock(node).Renew(ctx, &ticketv1.RenewRequest{Key: key, Token: token})
		if err == nil {
			op.ResLeaseMS = res.GetLeaseMs()
		}
		return err
	})
}

func (r *recorder) get(node int, key string) history.Op {
	return r.call(node, history.Op{Kind: history.Get, Key: key}, func(ctx context.Context, op *history.Op) error {
		res, err := r.c.Lock(node).GetLock(ctx, &ticketv1.GetLockRequest{Key: key})
		if err == nil {
			op.Held, op.HolderToken, op.HolderOwner = res.GetHeld(), res.GetToken(), res.GetOwner()
		}
		return err
	})
}

func (r *recorder) checkToken(node int, key string, token uint64) history.Op {
	return r.call(node, history.Op{Kind: history.CheckToken, Key: key, Token: token}, func(ctx context.Context, op *history.Op) error {
		res, err := r.c.Lock(node).CheckToken(ctx, &ticketv1.CheckTokenRequest{Key: key, Token: token})
		if err == nil {
			op.Valid, op.HolderToken = res.GetValid(), res.GetCurrentToken()
		}
		return err
	})
}

// until repeats fn (a recorded call) until it succeeds or d passes, and
// returns the last op and how long it took.
func until(d time.Duration, fn func() history.Op) (history.Op, time.Duration) {
	start := time.Now()
	for {
		op := fn()
		if op.Outcome == history.OK || time.Since(start) > d {
			return op, time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// renewer renews (key, token) through the leader, whichever it is, every
// period until stop is closed; it reports on failed the first renewal that
// was refused (NotFound: the lock was expired or released).
func (r *recorder) renewer(key string, token uint64, period time.Duration, stop <-chan struct{}) (failed <-chan history.Op) {
	ch := make(chan history.Op, 1)
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			l, err := r.c.Leader(ctx)
			cancel()
			if err != nil {
				continue
			}
			if op := r.renew(l, key, token); op.Outcome == history.Fail {
				ch <- op
				return
			}
		}
	}()
	return ch
}

// verify runs every checker of package check on the history (no liveness
// window: the scenarios end with their locks held) and fails t on a
// violation, writing the report under the test's temp dir (kept in
// $TMPDIR/ticketd-hosts-reports).
func (r *recorder) verify(t *testing.T) {
	t.Helper()
	ops := r.rec.History()
	rep := check.Run(check.Input{Ops: ops, Timeout: time.Minute})
	t.Logf("%d ops, linearizability %s, %d violations", len(ops), rep.Linearizability.Verdict(), len(rep.Violations))
	if err := rep.Err(); err != nil {
		dir := filepath.Join(os.TempDir(), "ticketd-hosts-reports", filepath.Base(t.Name()))
		_ = rep.Write(dir, ops, nil)
		for _, op := range ops {
			t.Logf("  %s", op)
		}
		t.Errorf("%v (report: %s)", err, dir)
	}
}
