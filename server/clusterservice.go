package server

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/httpapi"
)

// clusterService implements ticket.v1.ClusterService on a Node. Status is
// served locally by any node; membership changes and leadership transfer are
// served by the leader (forwarded one hop).
type clusterService struct {
	n *Node
}

var _ ticketv1connect.ClusterServiceHandler = (*clusterService)(nil)

// Status reports this node's view of the cluster.
func (s *clusterService) Status(context.Context, *ticketv1.StatusRequest) (*ticketv1.StatusResponse, error) {
	n := s.n
	st := n.raft.Status()
	out := &ticketv1.StatusResponse{
		NodeId:       n.cfg.ID,
		Backend:      st.Backend,
		LeaderId:     st.Leader.ID,
		Term:         st.Term,
		CommitIndex:  st.CommitIndex,
		AppliedIndex: st.AppliedIndex,
		Members:      n.members(st.Members),
		LastToken:    n.sm.LastToken(),
		LocksHeld:    int64(n.sm.Len()),

		Replaying:         st.AppliedIndex < st.RecoveredCommitIndex,
		ReplayTargetIndex: st.RecoveredCommitIndex,
		LeasesTracked:     int64(n.lessor.Len()),
		SessionsOpen:      int64(n.sm.SessionLen()),
		MaxCommandVersion: uint32(n.commandVersion),
	}
	if st.Leader.ID != "" {
		out.LeaderAddr, _ = n.sm.MemberAPIAddr(st.Leader.ID)
		if out.LeaderAddr == "" && st.Leader.ID == n.cfg.ID {
			out.LeaderAddr = n.cfg.APIAddr
		}
	}
	return out, nil
}

// members converts a Raft configuration into API members with their API
// addresses from the replicated member directory.
func (n *Node) members(ms []core.Member) []*ticketv1.Member {
	out := make([]*ticketv1.Member, 0, len(ms))
	for _, m := range ms {
		api, _ := n.sm.MemberAPIAddr(m.ID)
		out = append(out, &ticketv1.Member{Id: m.ID, RaftAddr: m.RaftAddr, ApiAddr: api, Voter: m.Voter})
	}
	return out
}

// hasMember reports whether id is in the Raft configuration. A node in no
// configuration yet (a joiner before the leader's first append or snapshot
// reaches it) goes by the members its --join member named (learnPeers), as
// its peer transport does (docs/security.md#peer-identity-is-membership):
// the leader probes a joiner's API (AddMember's reachability check) with
// the caller's principal, which the joiner believes only from a member.
func (n *Node) hasMember(id string) bool {
	members := n.raft.Status().Members
	if len(members) == 0 {
		if l := n.joinMembers.Load(); l != nil {
			return slices.Contains(*l, id)
		}
	}
	for _, m := range members {
		if m.ID == id {
			return true
		}
	}
	return false
}

// AddMember adds a voter (id, raft_addr) and records its api_addr in the
// member directory. Adding an existing member updates its addresses. The
// leader refuses (ErrUnsafeMembership, FailedPrecondition) a member whose
// api_addr does not answer Status as that member (over TLS: with a
// certificate valid for that address), a member whose Status says it
// applies fewer command versions than the leader (it could stop on an entry
// already in the log: commandversion.go), and a change after which the
// voters that are up would not form a quorum (etcd --strict-reconfig-check).
// Every request is logged with its caller.
func (s *clusterService) AddMember(ctx context.Context, req *ticketv1.AddMemberRequest) (*ticketv1.AddMemberResponse, error) {
	n := s.n
	m := req.GetMember()
	n.audit().Info("AddMember requested", principalField(ctx), httpapi.AuditCaller(ctx), zap.String("member", m.GetId()),
		zap.String("raft_addr", m.GetRaftAddr()), zap.String("api_addr", m.GetApiAddr()))
	return onLeader(ctx, n, req, validateMember(m), n.fwd.Cluster, ticketv1connect.ClusterServiceClient.AddMember,
		func(ctx context.Context) (*ticketv1.AddMemberResponse, error) {
			cm := core.Member{ID: m.GetId(), RaftAddr: m.GetRaftAddr(), Voter: true}
			if err := n.checkAdd(ctx, cm, m.GetApiAddr()); err != nil {
				n.audit().Warn("AddMember refused", principalField(ctx), httpapi.AuditCaller(ctx), zap.String("member", cm.ID), zap.Error(err))
				return nil, err
			}
			if err := n.raft.AddVoter(ctx, cm); err != nil {
				return nil, err
			}
			if _, err := n.raft.Propose(ctx, core.SetMember(m.GetId(), m.GetApiAddr())); err != nil {
				return nil, err
			}
			n.audit().Info("member added", principalField(ctx), httpapi.AuditCaller(ctx), zap.String("member", cm.ID),
				zap.String("raft_addr", cm.RaftAddr), zap.String("api_addr", m.GetApiAddr()))
			return &ticketv1.AddMemberResponse{Members: n.members(n.raft.Status().Members)}, nil
		})
}

// validateMember checks the member of an AddMember request: an id, and
// host:port raft and API addresses.
func validateMember(m *ticketv1.Member) error {
	if m.GetId() == "" {
		return fmt.Errorf("%w: member id is empty", core.ErrInvalidArgument)
	}
	for name, addr := range map[string]string{"raft_addr": m.GetRaftAddr(), "api_addr": m.GetApiAddr()} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%w: member %s %q is not host:port", core.ErrInvalidArgument, name, addr)
		}
	}
	return nil
}

// RemoveMember removes a server from the configuration and its address from
// the member directory. The leader refuses (ErrUnsafeMembership) a removal
// after which the voters that are up would not form a quorum of the
// remaining configuration. Every request is logged with its caller.
func (s *clusterService) RemoveMember(ctx context.Context, req *ticketv1.RemoveMemberRequest) (*ticketv1.RemoveMemberResponse, error) {
	n := s.n
	id := req.GetId()
	n.audit().Info("RemoveMember requested", principalField(ctx), httpapi.AuditCaller(ctx), zap.String("member", id))
	var invalid error
	if id == "" {
		invalid = fmt.Errorf("%w: member id is empty", core.ErrInvalidArgument)
	}
	return onLeader(ctx, n, req, invalid, n.fwd.Cluster, ticketv1connect.ClusterServiceClient.RemoveMember,
		func(ctx context.Context) (*ticketv1.RemoveMemberResponse, error) {
			if !n.hasMember(id) {
				return nil, fmt.Errorf("%w: %q", ErrNoMember, id)
			}
			if err := n.checkRemove(ctx, id); err != nil {
				n.audit().Warn("RemoveMember refused", principalField(ctx), httpapi.AuditCaller(ctx), zap.String("member", id), zap.Error(err))
				return nil, err
			}
			if err := n.raft.RemoveServer(ctx, id); err != nil {
				return nil, err
			}
			n.audit().Info("member removed", principalField(ctx), httpapi.AuditCaller(ctx), zap.String("member", id))
			if id != n.cfg.ID {
				// Best effort: a stale directory entry of a removed member is harmless.
				_, _ = n.raft.Propose(ctx, core.SetMember(id, ""))
			}
			return &ticketv1.RemoveMemberResponse{Members: n.members(n.raft.Status().Members)}, nil
		})
}

// TransferLeader hands leadership to id (any up-to-date voter when empty) and
// returns the new leader's id once this node sees it (Raft thesis §3.10).
// Every request is logged with its caller on the audit log.
func (s *clusterService) TransferLeader(ctx context.Context, req *ticketv1.TransferLeaderRequest) (*ticketv1.TransferLeaderResponse, error) {
	n := s.n
	n.audit().Info("TransferLeader requested", principalField(ctx), httpapi.AuditCaller(ctx), zap.String("to", req.GetId()))
	return onLeader(ctx, n, req, nil, n.fwd.Cluster, ticketv1connect.ClusterServiceClient.TransferLeader,
		func(ctx context.Context) (*ticketv1.TransferLeaderResponse, error) {
			res, err := n.transferLeader(ctx, req.GetId())
			if err != nil {
				n.audit().Warn("leadership transfer failed", principalField(ctx), httpapi.AuditCaller(ctx), zap.String("to", req.GetId()), zap.Error(err))
				return nil, err
			}
			n.audit().Info("leadership transferred", principalField(ctx), httpapi.AuditCaller(ctx), zap.String("from", n.cfg.ID), zap.String("to", res.GetLeaderId()))
			return res, nil
		})
}

// transferLeader serves TransferLeader on the leader.
func (n *Node) transferLeader(ctx context.Context, id string) (*ticketv1.TransferLeaderResponse, error) {
	if id == n.cfg.ID {
		return &ticketv1.TransferLeaderResponse{LeaderId: id}, nil
	}
	if id != "" && !n.hasMember(id) {
		return nil, fmt.Errorf("%w: %q", ErrNoMember, id)
	}
	if err := n.raft.TransferLeadership(ctx, id); err != nil {
		return nil, err
	}
	// Report the new leader once this node knows it (bounded by ctx and 5s).
	deadline := time.Now().Add(5 * time.Second)
	for {
		if m, ok := n.raft.Leader(); ok && m.ID != n.cfg.ID {
			return &ticketv1.TransferLeaderResponse{LeaderId: m.ID}, nil
		}
		if time.Now().After(deadline) {
			return &ticketv1.TransferLeaderResponse{}, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}
