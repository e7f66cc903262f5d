package etcd

import (
	pb "go.etcd.io/raft/v3/raftpb"
)

// Commit notices. When a batch commits, etcd raft's leader tells every
// follower the new commit index at once with an empty MsgApp (raft.go,
// stepLeader on MsgAppResp: maybeCommit, then bcastAppend), and each
// follower answers it with a MsgAppResp. Under load the proposers that
// the commit answered propose again a moment later (settleProposers), and
// the MsgApp carrying their batch to the same follower carries the same
// commit index or a higher one (the leader's commit index never falls):
// the empty MsgApp, its answer, and the follower's Ready for it are spent
// on nothing the next message does not say.
//
// So the leader holds each follower's empty MsgApp for one round of its
// loop. A later MsgApp to that follower replaces it; any other message to
// that follower sends it first (messages to one follower keep their
// order); and whatever is held is sent before the loop would wait with no
// proposal queued, and at the end of the round after the one that held
// it, so a follower learns a commit index at most one loop round later
// than it would have. Holding or dropping a message is what the network
// may do to any Raft message (Raft thesis §3.3: messages may be delayed
// or lost, and a follower learns the commit index from any later
// AppendEntries or heartbeat); what is committed, and when the leader
// answers a proposer, do not change.

// heldNotice is a follower's empty MsgApp the loop holds back, and the
// loop round (loopState.round) in which it was held.
type heldNotice struct {
	m     *pb.Message
	round uint64
}

// commitNotices is the leader's held empty MsgApps, at most one per
// follower. Owned by the raft loop.
type commitNotices struct {
	held []heldNotice
}

// isCommitNotice reports whether m is an empty MsgApp: one that carries
// nothing but the leader's commit index (and the log position it probes).
func isCommitNotice(m *pb.Message) bool {
	return m.GetType() == pb.MsgApp && len(m.GetEntries()) == 0
}

// hold keeps m, an empty MsgApp, in place of the one held for its
// follower (the newer carries a commit index at least as high).
func (c *commitNotices) hold(m *pb.Message, round uint64) {
	for i := range c.held {
		if c.held[i].m.GetTo() == m.GetTo() {
			c.held[i] = heldNotice{m: m, round: round}
			return
		}
	}
	c.held = append(c.held, heldNotice{m: m, round: round})
}

// before returns the held notice that must be sent ahead of m, or nil, and
// forgets the notice for m's follower: a MsgApp replaces it (nil is
// returned), any other message must follow it.
func (c *commitNotices) before(m *pb.Message) *pb.Message {
	for i := range c.held {
		if c.held[i].m.GetTo() != m.GetTo() {
			continue
		}
		h := c.held[i].m
		c.remove(i)
		if m.GetType() == pb.MsgApp {
			return nil
		}
		return h
	}
	return nil
}

// due removes and returns, in the order held, the notices held in a round
// before round (all of them when round is ^uint64(0)), appending them to out.
func (c *commitNotices) due(round uint64, out []*pb.Message) []*pb.Message {
	kept := c.held[:0]
	for _, h := range c.held {
		if h.round < round {
			out = append(out, h.m)
		} else {
			kept = append(kept, h)
		}
	}
	clear(c.held[len(kept):])
	c.held = kept
	return out
}

func (c *commitNotices) remove(i int) {
	last := len(c.held) - 1
	copy(c.held[i:], c.held[i+1:])
	c.held[last] = heldNotice{}
	c.held = c.held[:last]
}

// sendOrHold sends m from a Ready, holding it instead when it is a
// leader's commit notice (see above), and sends first what is held for
// m's follower when m must follow it.
func (n *Node) sendOrHold(m *pb.Message, mayHold bool) {
	if mayHold && isCommitNotice(m) {
		n.notices.hold(m, n.round)
		return
	}
	if h := n.notices.before(m); h != nil {
		n.send(h)
	}
	n.send(m)
}

// sendNotices sends the notices held in a loop round before round
// (^uint64(0): every one).
func (n *Node) sendNotices(round uint64) {
	if len(n.notices.held) == 0 {
		return
	}
	n.noticeBuf = n.notices.due(round, n.noticeBuf[:0])
	for _, m := range n.noticeBuf {
		n.send(m)
	}
	clear(n.noticeBuf)
}
