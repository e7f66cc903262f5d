package etcd

import (
	"context"
	"time"

	"github.com/ticketd/ticketd/core"
)

// Submit implements core.Submitter: it encodes cmd in the entry envelope
// (envelope.go) and sends it on the raft loop's proposal channel,
// which the loop drains in order into raft proposals (propose), so a command
// sent before another is appended ahead of it. wait waits on the proposal's
// answer. Propose is Submit followed by wait. A proposal whose Submit ctx has
// ended when the loop takes it is not appended (wait returns ctx.Err()), one
// that raft drops or whose leader steps down before it applies fails with
// *core.NotLeaderError (it may still commit under the next leader). Errors:
// core.ErrInvalidArgument, *core.NotLeaderError, core.ErrStopped, ctx.Err().
func (n *Node) Submit(ctx context.Context, cmd core.Command) (func(context.Context) (core.Result, error), error) {
	data, err := encodeEntry(cmd)
	if err != nil {
		return nil, err
	}
	if err := n.leaderOnly(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	begin := time.Now()
	p := &proposal{ctx: ctx, id: n.nextID.Add(1), data: data, done: make(chan proposalResult, 1)}
	setEntryID(p.data, p.id)
	select {
	case n.propc <- p:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-n.done:
		return nil, n.stoppedErr()
	}
	return func(ctx context.Context) (core.Result, error) {
		var r proposalResult
		select {
		case r = <-p.done:
		case <-ctx.Done():
			return core.Result{}, ctx.Err()
		case <-n.done:
			return core.Result{}, n.stoppedErr()
		}
		if r.err == nil && n.cfg.Observer != nil {
			n.cfg.Observer.Proposed(time.Since(begin))
		}
		return r.res, r.err
	}, nil
}

var _ core.Submitter = (*Node)(nil)
