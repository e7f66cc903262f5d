package hashicorp

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/core"
)

// This file is core.Membership on hashicorp/raft (AddVoter, RemoveServer,
// TransferLeadership, each a leader-only Raft operation awaited until it
// commits) and backends.PeerLearner (LearnPeers).

// AddVoter adds m as a voter (or updates its address) and returns once the
// configuration entry is committed. Must be called on the leader. Errors as
// for Propose.
func (n *Node) AddVoter(ctx context.Context, m core.Member) error {
	if m.ID == "" || m.RaftAddr == "" {
		return fmt.Errorf("%w: add voter: empty id or raft address", core.ErrInvalidArgument)
	}
	_, err := n.leaderDo(ctx, func(timeout time.Duration) raft.Future {
		return n.raft.AddVoter(raft.ServerID(m.ID), raft.ServerAddress(m.RaftAddr), 0, timeout)
	})
	return err
}

// LearnPeers implements backends.PeerLearner: a node in no configuration
// yet (a joiner before the leader's first append reaches it) accepts peer
// traffic from the members given, and from no one else (peergate); a node
// in a configuration goes by it alone. hashicorp takes the leader's address
// from its requests, so only the ids are used. It never fails.
func (n *Node) LearnPeers(_ context.Context, members []core.Member) error {
	n.gate.Learn(members)
	return nil
}

// RemoveServer removes the server id from the configuration and returns once
// the change is committed. Must be called on the leader; removing the leader
// itself makes it step down after the commit. Errors as for Propose.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: remove server: empty id", core.ErrInvalidArgument)
	}
	_, err := n.leaderDo(ctx, func(timeout time.Duration) raft.Future {
		return n.raft.RemoveServer(raft.ServerID(id), 0, timeout)
	})
	return err
}

// TransferLeadership hands leadership to voter id, or to the most up-to-date
// voter when id is empty (Raft thesis §3.10; hashicorp LeadershipTransfer),
// and returns once this node has stepped down. Proposals during the transfer
// fail with a *core.NotLeaderError naming no leader. Transferring to this
// node, already the leader, does nothing. Errors: core.ErrInvalidArgument for
// an id that is not a voter, otherwise as for Propose, or a wrapped
// "leadership transfer timeout" from the library.
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	if id == "" {
		_, err := n.leaderDo(ctx, func(time.Duration) raft.Future { return n.raft.LeadershipTransfer() })
		return err
	}
	if id == n.cfg.ID && n.raft.State() == raft.Leader {
		return nil
	}
	var addr raft.ServerAddress
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if string(s.ID) == id && s.Suffrage == raft.Voter {
				addr = s.Address
			}
		}
	}
	if addr == "" {
		return fmt.Errorf("%w: transfer leadership: %q is not a voter", core.ErrInvalidArgument, id)
	}
	_, err := n.leaderDo(ctx, func(time.Duration) raft.Future {
		return n.raft.LeadershipTransferToServer(raft.ServerID(id), addr)
	})
	return err
}
