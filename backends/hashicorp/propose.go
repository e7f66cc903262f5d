package hashicorp

import (
	"context"

	"github.com/ticketd/ticketd/core"
)

// This file is Propose: a command submitted (submit.go) and awaited until it
// is applied here, group-committed by hashicorp's leader loop.

// Propose replicates cmd, waits until it is committed and applied locally, and
// returns the state machine's Result: Submit followed by its wait
// (submit.go). Concurrent proposals are group-committed by hashicorp's
// leader loop (BatchApplyCh; up to maxAppendEntries per log append and
// fsync). Errors: core.ErrInvalidArgument (unencodable cmd),
// *core.NotLeaderError, core.ErrStopped (wrapping the fatal apply error if
// one stopped the node), ctx.Err(). After a NotLeaderError returned for a
// proposal that was already appended (hashicorp's ErrLeadershipLost), or after
// a ctx error, the command may still commit.
func (n *Node) Propose(ctx context.Context, cmd core.Command) (core.Result, error) {
	data, err := core.Encode(cmd)
	if err != nil {
		return core.Result{}, err
	}
	return n.apply(ctx, data)
}

// apply is Propose of an encoded command (also the leader's barrier,
// leader.go).
func (n *Node) apply(ctx context.Context, data []byte) (core.Result, error) {
	wait, err := n.submit(ctx, data)
	if err != nil {
		return core.Result{}, err
	}
	return wait(ctx)
}
