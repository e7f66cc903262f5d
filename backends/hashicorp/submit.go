package hashicorp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/core"
)

// This file is core.Submitter on hashicorp/raft, and the two halves of every
// Raft operation this adapter starts (do): handing it to the library, then
// waiting for its future. raft.Apply returns once its log future is on the
// library's apply channel, which the leader loop drains in order into its log
// appends (api.go ApplyLog, raft.go leaderLoop): an Apply that returns before
// another begins is appended ahead of it.

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

// started is a Raft operation handed to the library, whose future is awaited
// on a goroutine tracked by n.inflight (hashicorp futures cannot be selected on).
type started struct {
	ctx  context.Context // ctx of start: its deadline was the enqueue timeout
	f    raft.Future
	done chan error // f.Error(), sent once
}

// start hands an operation to the library: fn receives the enqueue timeout
// (ctx's remaining time, 0 without a deadline). Errors: ctx.Err(),
// core.ErrStopped after Close.
func (n *Node) start(ctx context.Context, fn func(timeout time.Duration) raft.Future) (*started, error) {
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		if timeout = time.Until(dl); timeout <= 0 {
			return nil, context.DeadlineExceeded
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, n.stoppedErr()
	}
	n.inflight.Add(1)
	n.mu.Unlock()

	s := &started{ctx: ctx, f: fn(timeout), done: make(chan error, 1)}
	go func() {
		defer n.inflight.Done()
		s.done <- s.f.Error()
	}()
	return s, nil
}

// await waits for a started operation's future, honouring ctx and Close, and
// maps the library's errors to core's (mapErr). Call it once per start.
func (n *Node) await(ctx context.Context, s *started) (raft.Future, error) {
	var err error
	select {
	case err = <-s.done:
	case <-ctx.Done():
		select {
		case err = <-s.done:
		default:
			return nil, ctx.Err()
		}
	case <-n.stopCh:
		select {
		case err = <-s.done:
		default:
			return nil, n.stoppedErr()
		}
	}
	if errors.Is(err, raft.ErrEnqueueTimeout) {
		// The enqueue timeout is start's ctx's remaining time: the command
		// was not enqueued and that ctx is about to end; report its own
		// error, never an internal timeout (docs/api.md#errors).
		select {
		case <-s.ctx.Done():
			return nil, s.ctx.Err()
		case <-n.stopCh:
			return nil, n.stoppedErr()
		}
	}
	if err != nil {
		return nil, n.mapErr(err)
	}
	return s.f, nil
}

var _ core.Submitter = (*Node)(nil)
