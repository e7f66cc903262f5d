package etcd

import (
	"context"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/core"
)

// confRequest is one AddVoter or RemoveServer call, or one LearnPeers call
// (learn set: no change is proposed).
type confRequest struct {
	learn  addressBook
	ctx    context.Context
	id     uint64 // ConfChange.Id: matches the applied entry to the waiter
	add    bool
	nid    uint64
	member peerInfo
	done   chan error // buffered
	// proposed is set when handed to raft; index once the entry is seen in a Ready.
	proposed bool
	index    uint64
}

// transferRequest is one TransferLeadership call.
type transferRequest struct {
	ctx    context.Context
	id     string
	target uint64
	done   chan error // buffered
}

// AddVoter implements core.Membership: it proposes a ConfChangeAddNode (or
// ConfChangeUpdateNode when m is already a voter at another address) whose
// Context carries m's id and raft address, and returns once it is applied
// here. Changes are proposed one at a time, after this leader's barrier
// (etcd raft refuses a change while another is unapplied). Errors:
// *core.NotLeaderError, core.ErrInvalidArgument (empty id or address),
// ErrMemberIDConflict, ErrConfChangeRefused, core.ErrStopped, ctx.Err().
func (n *Node) AddVoter(ctx context.Context, m core.Member) error {
	if m.ID == "" || m.RaftAddr == "" {
		return fmt.Errorf("%w: member needs an id and a raft address", core.ErrInvalidArgument)
	}
	return n.changeConf(ctx, &confRequest{add: true, nid: raftID(m.ID), member: peerInfo{ID: m.ID, RaftAddr: m.RaftAddr}})
}

// RemoveServer implements core.Membership: it proposes a ConfChangeRemoveNode
// and returns once it is applied here. Removing a server that is not a member
// succeeds at once. A leader that removes itself steps down once the change
// applies (raft StepDownOnRemoval). Errors as for AddVoter;
// core.ErrInvalidArgument for the last voter.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty member id", core.ErrInvalidArgument)
	}
	return n.changeConf(ctx, &confRequest{nid: raftID(id), member: peerInfo{ID: id}})
}

func (n *Node) changeConf(ctx context.Context, c *confRequest) error {
	if err := n.leaderOnly(); err != nil {
		return err
	}
	c.ctx, c.id, c.done = ctx, n.nextID.Add(1), make(chan error, 1)
	err, rerr := roundTrip(ctx, n, n.confc, c, c.done)
	if rerr != nil {
		return rerr
	}
	return err
}

// LearnPeers implements backends.PeerLearner: a node in no configuration
// yet (a joiner before the leader's snapshot reaches it) takes members'
// raft addresses from members, which must come from replicated membership
// (the AddMember answer), so that it can answer the leader; a node in a
// configuration ignores them. This node's own entry is skipped. Errors:
// core.ErrStopped, ctx.Err().
func (n *Node) LearnPeers(ctx context.Context, members []core.Member) error {
	book := addressBook{}
	for _, m := range members {
		if m.ID != "" && m.RaftAddr != "" && m.ID != n.cfg.ID {
			book[raftID(m.ID)] = peerInfo{ID: m.ID, RaftAddr: m.RaftAddr}
		}
	}
	c := &confRequest{ctx: ctx, learn: book, done: make(chan error, 1)}
	err, rerr := roundTrip(ctx, n, n.confc, c, c.done)
	if rerr != nil {
		return rerr
	}
	return err
}

// learnPeers fills the address book of a node in no configuration from the
// members given to LearnPeers. A member's book comes only from committed
// ConfChanges and snapshots, so it is left alone.
func (n *Node) learnPeers(book addressBook) {
	if len(n.confState.GetVoters()) > 0 || len(n.confState.GetLearners()) > 0 {
		return
	}
	var ms []core.Member
	for nid, p := range book {
		n.book[nid] = p
		n.tr.SetPeer(nid, p.RaftAddr)
		ms = append(ms, core.Member{ID: p.ID, RaftAddr: p.RaftAddr})
	}
	n.gate.Learn(ms) // until the configuration names members, accept only these
	n.log.Info("learned peer addresses to join with", zap.Int("members", len(book)))
}

// proposeConfChange hands the next queued conf change to raft, once this
// leader's barrier is applied and no other change is in flight. A queued
// LearnPeers is done at once, on any node.
func (n *Node) proposeConfChange() {
	for n.confPending == nil && len(n.confQueue) > 0 {
		if c := n.confQueue[0]; c.learn != nil {
			n.confQueue = n.confQueue[1:]
			n.learnPeers(c.learn)
			c.done <- nil
			continue
		}
		if n.state != raft.StateLeader {
			n.failConf(n.notLeader())
			return
		}
		if !n.leaderReady {
			return
		}
		c := n.confQueue[0]
		n.confQueue = n.confQueue[1:]
		if err := c.ctx.Err(); err != nil {
			c.done <- err
			continue
		}
		cc, err := n.buildConfChange(c)
		if err != nil || cc == nil {
			c.done <- err // nil: nothing to change
			continue
		}
		if err := n.rn.ProposeConfChange(cc); err != nil {
			c.done <- n.notLeader()
			continue
		}
		c.proposed = true
		n.confPending = c
	}
}

// buildConfChange returns the change c asks for, nil when the configuration
// already is what c wants, or an error when c cannot be done.
func (n *Node) buildConfChange(c *confRequest) (*pb.ConfChange, error) {
	voter := slices.Contains(n.confState.GetVoters(), c.nid)
	member := voter || slices.Contains(n.confState.GetLearners(), c.nid)
	known, inBook := n.book[c.nid]
	if !c.add {
		if !member {
			return nil, nil
		}
		if voter && len(n.confState.GetVoters()) == 1 {
			return nil, fmt.Errorf("%w: cannot remove the last voter %s", core.ErrInvalidArgument, c.member.ID)
		}
		return &pb.ConfChange{Id: new(c.id), Type: pb.ConfChangeRemoveNode.Enum(), NodeId: new(c.nid)}, nil
	}
	if inBook && known.ID != c.member.ID {
		return nil, fmt.Errorf("%w: %q and %q", ErrMemberIDConflict, known.ID, c.member.ID)
	}
	typ := pb.ConfChangeAddNode
	if voter {
		if known == c.member {
			return nil, nil
		}
		typ = pb.ConfChangeUpdateNode
	}
	return &pb.ConfChange{Id: new(c.id), Type: typ.Enum(), NodeId: new(c.nid), Context: encodeContext(c.member)}, nil
}

// noteConfProposal finds the entry of the pending conf change in the Ready
// that follows its proposal. etcd raft turns a change it refuses into an
// empty normal entry; then the entry is missing and the change fails.
func (n *Node) noteConfProposal(ents []*pb.Entry) {
	c := n.confPending
	if c == nil || c.index != 0 || !c.proposed {
		return
	}
	for _, e := range ents {
		if e.GetType() != pb.EntryConfChange {
			continue
		}
		cc := &pb.ConfChange{}
		if proto.Unmarshal(e.GetData(), cc) == nil && cc.GetId() == c.id {
			c.index = e.GetIndex()
			return
		}
	}
	n.confPending = nil
	c.done <- ErrConfChangeRefused
}

// applyConfChange applies a committed ConfChange: the address book and the
// transport first (so the new member can be reached), then raft.
func (n *Node) applyConfChange(cc *pb.ConfChange) {
	nid := cc.GetNodeId()
	wasMember := slices.Contains(n.confState.GetVoters(), nid) || slices.Contains(n.confState.GetLearners(), nid)
	switch cc.GetType() {
	case pb.ConfChangeAddNode, pb.ConfChangeAddLearnerNode, pb.ConfChangeUpdateNode:
		p, err := decodeContext(cc.GetContext())
		if err != nil || p.ID == "" {
			n.log.Warn("conf change without member context", zap.Uint64("node", nid), zap.Error(err))
			break
		}
		if nid != n.id {
			n.book[nid] = p
			n.tr.SetPeer(nid, p.RaftAddr)
		}
		n.saveBook()
		if !wasMember {
			n.forceSnap = true // the snapshot a new member receives must name it
		}
	case pb.ConfChangeRemoveNode:
		if nid != n.id {
			n.tr.RemovePeer(nid)
		}
	}
	n.confState = n.rn.ApplyConfChange(cc)
	if cc.GetType() == pb.ConfChangeRemoveNode && nid != n.id {
		delete(n.book, nid)
		n.saveBook()
	}
	n.refreshMembers()
	if c := n.confPending; c != nil && cc.GetId() == c.id {
		n.confPending = nil
		c.done <- nil
	}
}

// TransferLeadership implements core.Membership (Raft thesis §3.10, etcd raft
// MsgTransferLeader): it asks raft to hand leadership to voter id, or to the
// voter with the highest match index when id is empty, and returns once
// another node leads. Errors: *core.NotLeaderError, ErrUnknownMember,
// ErrTransferFailed (the transferee did not take over within an election
// timeout, or another node won), core.ErrStopped, ctx.Err().
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	if err := n.leaderOnly(); err != nil {
		return err
	}
	t := &transferRequest{ctx: ctx, id: id, done: make(chan error, 1)}
	err, rerr := roundTrip(ctx, n, n.transc, t, t.done)
	if rerr != nil {
		return rerr
	}
	return err
}

// startTransfer picks the transferee and asks raft to transfer.
func (n *Node) startTransfer(t *transferRequest) {
	if n.state != raft.StateLeader {
		t.done <- n.notLeader()
		return
	}
	voters := n.confState.GetVoters()
	if t.id == "" {
		var best uint64
		var bestMatch uint64
		for nid, pr := range n.rn.Status().Progress {
			if nid != n.id && slices.Contains(voters, nid) && (best == 0 || pr.Match > bestMatch) {
				best, bestMatch = nid, pr.Match
			}
		}
		if best == 0 {
			t.done <- fmt.Errorf("%w: no other voter to transfer leadership to", ErrUnknownMember)
			return
		}
		t.target = best
	} else {
		t.target = raftID(t.id)
		if !slices.Contains(voters, t.target) {
			t.done <- fmt.Errorf("%w: %q is not a voter", ErrUnknownMember, t.id)
			return
		}
	}
	if t.target == n.id {
		t.done <- nil
		return
	}
	if n.transfer != nil {
		n.transfer.done <- fmt.Errorf("%w: superseded by another transfer", ErrTransferFailed)
	}
	n.rn.TransferLeader(t.target)
	if n.rn.BasicStatus().LeadTransferee != t.target {
		t.done <- fmt.Errorf("%w: raft did not start the transfer to %s", ErrTransferFailed, n.member(t.target).ID)
		return
	}
	n.transfer = t
}

// checkTransfer answers the pending transfer once another node leads, or
// when raft aborted it (no transferee left while still leading).
func (n *Node) checkTransfer() {
	t := n.transfer
	if t == nil {
		return
	}
	switch {
	case t.ctx.Err() != nil:
		n.transfer = nil
	case n.state == raft.StateLeader:
		if n.rn.BasicStatus().LeadTransferee == raft.None {
			n.transfer = nil
			t.done <- fmt.Errorf("%w: %s did not take over within an election timeout", ErrTransferFailed, n.member(t.target).ID)
		}
	case n.lead == raft.None:
		// An election is under way; wait for its winner.
	case n.lead == t.target:
		n.transfer = nil
		t.done <- nil
	default:
		n.transfer = nil
		t.done <- fmt.Errorf("%w: %s took over instead of %s", ErrTransferFailed, n.member(n.lead).ID, n.member(t.target).ID)
	}
}
