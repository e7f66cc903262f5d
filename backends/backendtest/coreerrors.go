package backendtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ticketd/ticketd/core"
)

// IsCoreError reports whether err is nil, matches one of core's sentinels
// (core.ErrNotLeader, core.ErrStopped, core.ErrDecode,
// core.ErrInvalidArgument), or is a ctx error of a ctx that has indeed ended.
// Backends return nothing else (docs/design.md#the-consensus-contract): the
// server maps core's errors to API codes and knows no backend's own errors,
// and reports an internal timeout as context.DeadlineExceeded would tell the
// client that its own deadline passed when it did not.
func IsCoreError(ctx context.Context, err error) bool {
	switch {
	case err == nil,
		errors.Is(err, core.ErrNotLeader),
		errors.Is(err, core.ErrStopped),
		errors.Is(err, core.ErrDecode),
		errors.Is(err, core.ErrInvalidArgument):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ctx.Err() != nil
	}
	return false
}

// errorCheck records every error a checkedNode returned that IsCoreError
// refuses; the Cluster fails its test with them when it ends.
type errorCheck struct {
	mu  sync.Mutex
	bad []string
}

func (c *errorCheck) check(ctx context.Context, node, op string, err error) error {
	if !IsCoreError(ctx, err) {
		c.mu.Lock()
		c.bad = append(c.bad, fmt.Sprintf("%s.%s: %v (%T)", node, op, err, err))
		c.mu.Unlock()
	}
	return err
}

func (c *errorCheck) violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.bad...)
}

// checkedNode is a Node whose Consensus and Membership errors are checked
// by an errorCheck.
type checkedNode struct {
	Node
	id    string
	check *errorCheck
}

func (n *checkedNode) Propose(ctx context.Context, cmd core.Command) (core.Result, error) {
	res, err := n.Node.Propose(ctx, cmd)
	return res, n.check.check(ctx, n.id, "Propose", err)
}

func (n *checkedNode) ReadIndex(ctx context.Context) error {
	return n.check.check(ctx, n.id, "ReadIndex", n.Node.ReadIndex(ctx))
}

func (n *checkedNode) AddVoter(ctx context.Context, m core.Member) error {
	return n.check.check(ctx, n.id, "AddVoter", n.Node.AddVoter(ctx, m))
}

func (n *checkedNode) RemoveServer(ctx context.Context, id string) error {
	return n.check.check(ctx, n.id, "RemoveServer", n.Node.RemoveServer(ctx, id))
}

func (n *checkedNode) TransferLeadership(ctx context.Context, id string) error {
	return n.check.check(ctx, n.id, "TransferLeadership", n.Node.TransferLeadership(ctx, id))
}

func (n *checkedNode) ConfirmTerm(ctx context.Context) (uint64, error) {
	term, err := n.Node.ConfirmTerm(ctx)
	return term, n.check.check(ctx, n.id, "ConfirmTerm", err)
}

// Unwrap returns the backend's own node.
func (n *checkedNode) Unwrap() Node { return n.Node }

// testErrorsAreCore: the error paths of every Consensus and Membership
// method return only core's errors or the ctx error of an ended ctx (every
// call of the suite is checked as well, by checkedNode).
func testErrorsAreCore(t *testing.T, open Factory) {
	ctx := testContext(t)
	c := NewCluster(t, open)
	c.Start(3)
	l := c.WaitLeader()
	f := follower(c, l)
	checkErrors(t, []errorCall{
		{"propose_on_follower", ctx, func(ctx context.Context) error { _, err := f.Node().Propose(ctx, grant("f")); return err }},
		{"read_index_on_follower", ctx, func(ctx context.Context) error { return f.Node().ReadIndex(ctx) }},
		{"add_voter_on_follower", ctx, func(ctx context.Context) error {
			return f.Node().AddVoter(ctx, core.Member{ID: "y", RaftAddr: "127.0.0.1:1"})
		}},
		{"transfer_on_follower", ctx, func(ctx context.Context) error { return f.Node().TransferLeadership(ctx, l.ID) }},
	})
	leaderErrorsAreCore(ctx, t, c, l)
}

// errorCall is one call that must fail with an error IsCoreError accepts.
type errorCall struct {
	name string
	ctx  context.Context
	call func(ctx context.Context) error
}

// checkErrors makes each call and checks that it fails with an error core
// defines or the ctx error of its ended ctx.
func checkErrors(t *testing.T, calls []errorCall) {
	t.Helper()
	for _, tc := range calls {
		err := tc.call(tc.ctx)
		if err == nil || !IsCoreError(tc.ctx, err) {
			t.Errorf("%s: %v (%T), want an error core defines or a ctx error", tc.name, err, err)
		}
	}
}

// leaderErrorsAreCore checks the leader half of errors_are_core on l, then
// kills it: bad arguments are core.ErrInvalidArgument-class errors, an ended
// ctx gives its error, and a closed node answers core.ErrStopped.
func leaderErrorsAreCore(ctx context.Context, t *testing.T, c *Cluster, l *Peer) {
	t.Helper()
	done, cancel := context.WithCancel(ctx)
	cancel()
	checkErrors(t, []errorCall{
		{"transfer_to_unknown", ctx, func(ctx context.Context) error { return l.Node().TransferLeadership(ctx, "nobody") }},
		{"add_voter_without_address", ctx, func(ctx context.Context) error { return l.Node().AddVoter(ctx, core.Member{ID: "x"}) }},
		{"remove_server_empty_id", ctx, func(ctx context.Context) error { return l.Node().RemoveServer(ctx, "") }},
		{"propose_cancelled", done, func(ctx context.Context) error { _, err := l.Node().Propose(ctx, grant("c")); return err }},
		{"read_index_cancelled", done, func(ctx context.Context) error { return l.Node().ReadIndex(ctx) }},
	})
	closed := l.Node()
	c.Kill(l)
	if _, err := closed.Propose(ctx, grant("after-close")); !errors.Is(err, core.ErrStopped) {
		t.Errorf("propose after close: %v, want core.ErrStopped", err)
	}
	if err := closed.TransferLeadership(ctx, ""); !errors.Is(err, core.ErrStopped) {
		t.Errorf("transfer after close: %v, want core.ErrStopped", err)
	}
}
