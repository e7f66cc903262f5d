package hashicorp

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/raft"
)

// This file is the two halves of every Raft operation this adapter starts
// (do): handing it to the library (start), then waiting for its future
// (await), honouring ctx and Close. It is the one exchange between a caller
// and hashicorp/raft that Submit, ReadIndex and the membership changes use.

// do starts a Raft operation and waits for its future, honouring ctx and
// Close (start and await). start receives the enqueue timeout to pass to
// hashicorp (ctx's remaining time, 0 without a deadline).
func (n *Node) do(ctx context.Context, start func(timeout time.Duration) raft.Future) (raft.Future, error) {
	s, err := n.start(ctx, start)
	if err != nil {
		return nil, err
	}
	return n.await(ctx, s)
}

// leaderDo is do for operations only the leader serves.
func (n *Node) leaderDo(ctx context.Context, start func(timeout time.Duration) raft.Future) (raft.Future, error) {
	if err := n.checkOpen(); err != nil {
		return nil, err
	}
	if n.raft.State() != raft.Leader {
		return nil, n.notLeader()
	}
	return n.do(ctx, start)
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
