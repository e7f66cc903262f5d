package etcd

import (
	"context"
	"encoding/binary"

	"go.etcd.io/raft/v3"

	"github.com/ticketd/ticketd/core"
)

// readRequest is one ReadIndex (or ConfirmTerm) call waiting for its batch.
type readRequest struct {
	ctx  context.Context
	done chan readResult // buffered
}

// readResult answers a readRequest: the term in which the quorum confirmed
// this node's leadership, or the error.
type readResult struct {
	term uint64
	err  error
}

// ReadIndex implements core.Consensus (Raft thesis §6.4, etcd ReadIndex): the
// loop serves every reader waiting when it asks raft for a read index with
// one request (dgraph's RunReadIndexLoop), and releases them once this node
// has applied up to the index raft confirmed with a quorum. Only the leader
// serves it; followers return *core.NotLeaderError. Errors:
// *core.NotLeaderError, core.ErrStopped, ctx.Err().
func (n *Node) ReadIndex(ctx context.Context) error {
	_, err := n.ConfirmTerm(ctx)
	return err
}

// ConfirmTerm implements core.TermConfirmer: it is ReadIndex, and returns the
// term in which a quorum confirmed this node's leadership. The term is the
// one raft was in when the loop issued the ReadIndex request, checked again
// when raft's ReadState for it comes out of a Ready: etcd raft drops pending
// read requests on a term change (raft.reset), and a ReadState is only made
// by the leader of the term that received the request, so when both terms
// are equal it is the confirmed one. A batch whose term changed in between
// is issued again (and fails with *core.NotLeaderError if this node no
// longer leads). Errors are ReadIndex's.
func (n *Node) ConfirmTerm(ctx context.Context) (uint64, error) {
	if err := n.leaderOnly(); err != nil {
		return 0, err
	}
	r := &readRequest{ctx: ctx, done: make(chan readResult, 1)}
	res, err := roundTrip(ctx, n, n.readc, r, r.done)
	if err != nil {
		return 0, err
	}
	return res.term, res.err
}

// readBatch is a set of readers served by one raft ReadIndex request.
type readBatch struct {
	seq    uint64
	reqs   []*readRequest
	issued uint64 // tick count when sent
	term   uint64 // raft term when sent
	index  uint64
}

// failReads fails every reader not yet answered by raft with err.
func (n *Node) failReads(err error) {
	for _, r := range n.readQueue {
		r.done <- readResult{err: err}
	}
	n.readQueue = nil
	if n.readFlight != nil {
		for _, r := range n.readFlight.reqs {
			r.done <- readResult{err: err}
		}
		n.readFlight = nil
	}
}

// failWaitingReads fails every reader raft answered that waits for its index
// to apply.
func (n *Node) failWaitingReads(err error) {
	for _, b := range n.readWaiting {
		for _, r := range b.reqs {
			r.done <- readResult{err: err}
		}
	}
	n.readWaiting = nil
}

// issueRead sends one raft ReadIndex request for every reader queued, when
// none is in flight.
func (n *Node) issueRead() {
	if n.readFlight != nil || len(n.readQueue) == 0 {
		return
	}
	if n.state != raft.StateLeader {
		n.failReads(n.notLeader())
		return
	}
	live := n.readQueue[:0]
	for _, r := range n.readQueue {
		if r.ctx.Err() == nil {
			live = append(live, r)
		}
	}
	n.readQueue = nil
	if len(live) == 0 {
		return
	}
	n.readSeq++
	var rctx [8]byte
	binary.BigEndian.PutUint64(rctx[:], n.readSeq)
	n.rn.ReadIndex(rctx[:])
	n.readFlight = &readBatch{seq: n.readSeq, reqs: live, issued: n.ticks, term: n.rn.BasicStatus().GetTerm()}
}

// onReadState moves the batch raft answered to wait for its index to apply,
// or queues it again when raft's term is no longer the one it was issued in
// (see ConfirmTerm).
func (n *Node) onReadState(rs raft.ReadState) {
	b := n.readFlight
	if b == nil || len(rs.RequestCtx) != 8 || binary.BigEndian.Uint64(rs.RequestCtx) != b.seq {
		return
	}
	if n.state != raft.StateLeader || n.rn.BasicStatus().GetTerm() != b.term {
		n.readQueue = append(b.reqs, n.readQueue...)
		n.readFlight = nil
		return
	}
	b.index = rs.Index
	n.readWaiting = append(n.readWaiting, b)
	n.readFlight = nil
}

// releaseReads answers every batch whose read index is applied.
func (n *Node) releaseReads() {
	kept := n.readWaiting[:0]
	for _, b := range n.readWaiting {
		if b.index > n.applied {
			kept = append(kept, b)
			continue
		}
		for _, r := range b.reqs {
			r.done <- readResult{term: b.term}
		}
	}
	clear(n.readWaiting[len(kept):])
	n.readWaiting = kept
}

var _ core.TermConfirmer = (*Node)(nil)
