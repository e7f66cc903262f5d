package backendtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ticketd/ticketd/core"
)

// Submit forwards to the node's Submit, checking the errors of Submit and
// of its wait.
func (n *checkedNode) Submit(ctx context.Context, cmd core.Command) (func(context.Context) (core.Result, error), error) {
	wait, err := n.Node.Submit(ctx, cmd)
	if err != nil {
		return nil, n.check.check(ctx, n.id, "Submit", err)
	}
	return func(ctx context.Context) (core.Result, error) {
		res, err := wait(ctx)
		return res, n.check.check(ctx, n.id, "Submit.wait", err)
	}, nil
}

// submitRounds is how many handoffs testSubmitOrder makes.
const submitRounds = 100

// testSubmitOrder (docs/design.md#handoff): a command submitted before
// another is given to the leader commits ahead of it, whether the second
// comes from a Submit on the same goroutine or a Propose on another one
// started after Submit returned, while other goroutines propose concurrently.
// Each round submits the holder's Release and then the next holder's Grant
// of one key: every Grant must find the key free (Granted, never
// GrantRejected), and the leader's apply log must alternate Release and
// Grant of that key in index order. On a follower Submit fails with a
// not-leader error naming the leader, and with an ended ctx it fails with
// that ctx's error.
func testSubmitOrder(t *testing.T, open Factory) {
	ctx := testContext(t)
	c := NewCluster(t, open)
	c.Start(3)
	l := c.WaitLeader()
	submitInOrder(ctx, t, l)
	f := follower(c, l)
	_, err := f.Node().Submit(ctx, grant("on-follower"))
	requireNotLeader(t, err, l)
	c.EnsureSame()
}

// submitInOrder checks the leader half of submit_order on l: the handoff
// rounds under concurrent load, the alternation in l's apply log, and a
// Submit with an ended ctx failing with its error.
func submitInOrder(ctx context.Context, t *testing.T, l *Peer) {
	t.Helper()
	n := l.Node()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := n.Propose(ctx, grant(fmt.Sprintf("load%d-%d", w, i))); err != nil {
					t.Errorf("concurrent propose: %v", err)
					return
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	const key = "handoff"
	tok := mustGrant(ctx, t, n, key)
	for i := 0; i < submitRounds; i++ {
		waitRelease, err := n.Submit(ctx, core.Release(key, tok))
		if err != nil {
			t.Fatalf("round %d: submit release: %v", i, err)
		}
		next := core.Grant(key, leaseMS, fmt.Sprintf("holder-%d", i))
		var res core.Result
		if i%2 == 0 {
			waitGrant, err := n.Submit(ctx, next)
			if err != nil {
				t.Fatalf("round %d: submit grant: %v", i, err)
			}
			res, err = waitGrant(ctx)
			if err != nil {
				t.Fatalf("round %d: grant: %v", i, err)
			}
		} else {
			type outcome struct {
				res core.Result
				err error
			}
			out := make(chan outcome, 1)
			go func() {
				res, err := n.Propose(ctx, next)
				out <- outcome{res, err}
			}()
			o := <-out
			if o.err != nil {
				t.Fatalf("round %d: grant: %v", i, o.err)
			}
			res = o.res
		}
		if res.Outcome != core.OutcomeGranted {
			t.Fatalf("round %d: grant behind the release: %+v, want granted (the grant entered the log first)", i, res)
		}
		rel, err := waitRelease(ctx)
		if err != nil || rel.Outcome != core.OutcomeReleased {
			t.Fatalf("round %d: release: %+v, %v; want released", i, rel, err)
		}
		tok = res.Token
	}

	applied := l.StateMachine().AppliedIndex()
	var ops []core.Op
	for _, r := range upTo(l.Applies().Records(), applied) {
		if r.Cmd.Key == key {
			ops = append(ops, r.Cmd.Op)
		}
	}
	if len(ops) != 2*submitRounds+1 {
		t.Fatalf("leader applied %d commands on %q, want %d", len(ops), key, 2*submitRounds+1)
	}
	for i, op := range ops {
		if want := []core.Op{core.OpGrant, core.OpRelease}[i%2]; op != want {
			t.Fatalf("command %d on %q is %v, want %v (ops %v)", i, key, op, want, ops)
		}
	}

	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := n.Submit(done, grant("cancelled")); !errors.Is(err, context.Canceled) {
		t.Fatalf("submit with an ended ctx: %v, want context.Canceled", err)
	}
}
