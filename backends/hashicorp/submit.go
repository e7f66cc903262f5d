package hashicorp

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/core"
)

// This file is core.Submitter on hashicorp/raft. raft.Apply returns once its
// log future is on the library's apply channel, which the leader loop drains
// in order into its log appends (api.go ApplyLog, raft.go leaderLoop): an
// Apply that returns before another begins is appended ahead of it.

// Submit implements core.Submitter: it hands core.Encode(cmd) to raft.Apply,
// which returns once the entry is queued on the leader loop's apply channel,
// and returns a wait function that awaits its future and returns the state
// machine's Result. Propose is Submit followed by wait. Errors (of Submit, or
// of wait when the library reports them through the future) are Propose's:
// core.ErrInvalidArgument, *core.NotLeaderError, core.ErrStopped, ctx.Err()
// (an enqueue timeout is reported as the Submit ctx's error).
func (n *Node) Submit(ctx context.Context, cmd core.Command) (func(context.Context) (core.Result, error), error) {
	data, err := core.Encode(cmd)
	if err != nil {
		return nil, err
	}
	return n.submit(ctx, data)
}

// submit is Submit of an encoded command (also the leader's barrier, leader.go).
func (n *Node) submit(ctx context.Context, data []byte) (func(context.Context) (core.Result, error), error) {
	if n.raft.State() != raft.Leader {
		if err := n.checkOpen(); err != nil {
			return nil, err
		}
		return nil, n.notLeader()
	}
	begin := time.Now()
	s, err := n.start(ctx, func(timeout time.Duration) raft.Future { return n.raft.Apply(data, timeout) })
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (core.Result, error) {
		f, err := n.await(ctx, s)
		if err != nil {
			return core.Result{}, err
		}
		elapsed := time.Since(begin)
		resp, ok := f.(raft.ApplyFuture).Response().(*applyResponse)
		if !ok {
			return core.Result{}, fmt.Errorf("hashicorp: unexpected FSM response %T", f.(raft.ApplyFuture).Response())
		}
		if resp.err != nil {
			return core.Result{}, resp.err
		}
		if n.cfg.Observer != nil {
			n.cfg.Observer.Proposed(elapsed)
		}
		return resp.res, nil
	}, nil
}
