package server

import (
	"context"
	"time"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/forward"
)

// onLeader serves one request that only the promoted leader may answer: the
// shared shape of every write and linearizable read of the API.
//
//  1. invalid, the request's validation error, is returned before anything
//     else: bad input changes nothing and is never forwarded.
//  2. route decides where the request is served, waiting (bounded) for an
//     election or this node's promotion.
//  3. On the leader, local serves it; elsewhere it is forwarded one hop with
//     method on the leader's client (client(leader API address)).
//  4. Whatever the outcome, the error is mapped to a connect error once, by
//     toConnect (errmap.go).
//
// client is a constructor of n.fwd (Lock or Cluster) and method a method
// expression of its interface, for instance
// ticketv1connect.LockServiceClient.Release.
func onLeader[C, Req, Res any](
	ctx context.Context, n *Node, req *Req, invalid error,
	client func(addr string) C, method func(C, context.Context, *Req) (*Res, error),
	local func(context.Context) (*Res, error),
) (*Res, error) {
	res, err := func() (*Res, error) {
		if invalid != nil {
			return nil, invalid
		}
		leader, here, err := n.route(ctx)
		if err != nil {
			return nil, err
		}
		if !here {
			c := client(leader.APIAddr)
			return forward.Call(ctx, n.fwd, leader.ID, func(ctx context.Context, req *Req) (*Res, error) {
				return method(c, ctx, req)
			}, req)
		}
		return local(ctx)
	}()
	return res, n.toConnect(err)
}

// afterReadIndex returns a local handler that serves read once this node's
// leadership is confirmed by a quorum and its table has applied everything
// committed before the call (core.Consensus.ReadIndex): a linearizable read.
func afterReadIndex[Res any](n *Node, read func() (*Res, error)) func(context.Context) (*Res, error) {
	return func(ctx context.Context) (*Res, error) {
		if err := n.raft.ReadIndex(ctx); err != nil {
			return nil, err
		}
		return read()
	}
}

// leaderMember returns the leader this node knows of, with its API address
// from the member directory (empty when not recorded yet).
func (n *Node) leaderMember() (core.Member, bool) {
	b := n.backend()
	if b == nil {
		return core.Member{}, false
	}
	m, ok := b.Leader()
	if ok && m.APIAddr == "" {
		m.APIAddr, _ = n.sm.MemberAPIAddr(m.ID)
	}
	return m, ok
}

// route decides where a leader-only request is served: locally (true) when
// this node is the promoted leader, else at the returned leader (API address
// known). It waits up to the leader wait, bounded by ctx, for an election in
// progress, this node's own promotion, or the leader's API address to be
// known. A request forwarded by another node is never forwarded again: it
// gets a *core.NotLeaderError at once when another node leads.
func (n *Node) route(ctx context.Context) (core.Member, bool, error) {
	if n.role.isServing() {
		return core.Member{}, true, nil // the hot path: no lock, no timer, no lookups
	}
	timer := time.NewTimer(n.role.wait)
	defer timer.Stop()
	forwarded := forward.Forwarded(ctx)
	for {
		promoted, closing, changed := n.role.now()
		if closing {
			return core.Member{}, false, core.ErrStopped
		}
		if promoted {
			return core.Member{}, true, nil
		}
		leader, ok := n.leaderMember()
		if ok && leader.ID != n.cfg.ID {
			if forwarded {
				return core.Member{}, false, &core.NotLeaderError{Leader: leader}
			}
			if leader.APIAddr != "" {
				return leader, false, nil
			}
		}
		select {
		case <-changed:
		case <-time.After(20 * time.Millisecond):
		case <-timer.C:
			return core.Member{}, false, &core.NotLeaderError{Leader: leader}
		case <-ctx.Done():
			return core.Member{}, false, ctx.Err()
		}
	}
}
