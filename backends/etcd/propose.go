package etcd

import (
	"context"
	"runtime"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/core"
)

// proposal is one Propose call waiting for its entry to apply.
type proposal struct {
	ctx  context.Context
	id   uint64
	data []byte
	done chan proposalResult // buffered: the loop never blocks on it
}

// proposalResult answers a proposal: the state machine's result or the error.
type proposalResult struct {
	res core.Result
	err error
}

// Propose implements core.Consensus: Submit (submit.go) followed by its
// wait. The raft loop batches every proposal waiting into one raft proposal
// (one append, one fsync, one replication round), and Propose waits until the
// entry is applied here. A proposal that raft drops, or whose leader steps
// down before it applies, fails with *core.NotLeaderError (it may still
// commit under the next leader).
func (n *Node) Propose(ctx context.Context, cmd core.Command) (core.Result, error) {
	wait, err := n.Submit(ctx, cmd)
	if err != nil {
		return core.Result{}, err
	}
	return wait(ctx)
}

// maxHold bounds how long new proposals wait for the batch in flight.
const maxHold = 2 * time.Millisecond

// holdProposals reports whether the leader keeps new proposals queued because
// an earlier batch is still uncommitted (group commit, as hashicorp's leader
// does with one dispatch at a time): the proposers answered when it applies
// join those queued meanwhile in one batch — one fsync on every node instead
// of a trickle of small ones. A single proposer never waits (nothing is in
// flight when it proposes), and no hold outlasts maxHold.
func (n *Node) holdProposals() bool {
	hold := n.state == raft.StateLeader && len(n.pending) > 0 && !n.holdExpired
	switch {
	case hold && !n.holding:
		n.holding = true
		n.holdTimer.Reset(maxHold)
	case !hold && n.holding:
		n.holding = false
		n.holdTimer.Stop()
	}
	if len(n.pending) == 0 {
		n.holdExpired = false
	}
	return hold
}

// settleProposers gives the k proposers just answered a moment to propose
// again before the loop takes the next batch: yielding the processor until
// k proposals are queued or the queue stops growing (a few yields, not a
// timer), so they leave in one batch instead of the first comer's alone.
func (n *Node) settleProposers(k int) {
	for i, still := 0, 0; i < 64 && len(n.propc) < k && still < 4; i++ {
		l := len(n.propc)
		runtime.Gosched()
		if len(n.propc) == l {
			still++
		} else {
			still = 0
		}
	}
}

// propose drains every waiting proposal and hands them to raft as one MsgProp
// (one log append, one fsync, one MsgApp per follower).
func (n *Node) propose(first *proposal) {
	batch := []*proposal{first}
drain:
	for len(batch) < maxProposalBatch {
		select {
		case p := <-n.propc:
			batch = append(batch, p)
		default:
			break drain
		}
	}
	if n.state != raft.StateLeader {
		err := n.notLeader()
		for _, p := range batch {
			p.done <- proposalResult{err: err}
		}
		return
	}
	ents := make([]*pb.Entry, 0, len(batch))
	live := batch[:0]
	for _, p := range batch {
		if p.ctx.Err() != nil {
			continue // its caller has gone: do not replicate it
		}
		ents = append(ents, &pb.Entry{Data: p.data})
		live = append(live, p)
	}
	if len(ents) == 0 {
		return
	}
	err := n.rn.Step(&pb.Message{Type: pb.MsgProp.Enum(), From: new(n.id), Entries: ents})
	if err != nil {
		n.log.Debug("proposal dropped", zap.Int("entries", len(ents)), zap.Error(err))
		nl := n.notLeader()
		for _, p := range live {
			p.done <- proposalResult{err: nl}
		}
		return
	}
	for _, p := range live {
		n.pending[p.id] = p
	}
}
