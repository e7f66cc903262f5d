package sdk

import (
	"context"
	"fmt"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// statusRequest is the (empty) request of every Status call.
func statusRequest() *ticketv1.StatusRequest { return &ticketv1.StatusRequest{} }

// Status returns the leader's view of the cluster (term, indexes, members,
// last token, locks held) and refreshes the client's idea of the leader.
//
// Errors: the ctx error wrapping the last failure (often ErrUnavailable).
func (c *Client) Status(ctx context.Context) (*ticketv1.StatusResponse, error) {
	spec := callSpec{op: "status", toLeader: true, timeout: c.cfg.requestTimeout}
	res, _, err := invoke(ctx, c, spec, func(ctx context.Context, n *node) (*ticketv1.StatusResponse, error) {
		return n.cluster.Status(ctx, statusRequest())
	})
	return res, err
}

// NodeStatus returns the status that the node at endpoint ("host:port" or a
// URL) reports about itself, in one attempt, without following the leader.
//
// Errors: ErrInvalidArgument for an endpoint that does not parse, or the
// call's error (ErrUnavailable when the node cannot be reached).
func (c *Client) NodeStatus(ctx context.Context, endpoint string) (*ticketv1.StatusResponse, error) {
	u, err := c.baseURL(endpoint)
	if err != nil {
		return nil, fmt.Errorf("status %q: %w: %w", endpoint, ErrInvalidArgument, err)
	}
	c.mu.Lock()
	n := c.nodeFor(u)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
	defer cancel()
	res, err := n.cluster.Status(ctx, statusRequest())
	if err != nil {
		return nil, wrapErr("status", u, err)
	}
	return res, nil
}

// AddMember adds a voter to the cluster: its id, its Raft (peer) address and
// its client API address. The node must be running and reachable by the
// leader. It returns the members afterwards.
//
// Errors: ErrInvalidArgument, the server's error for a refused change, or
// the ctx error wrapping the last failure.
func (c *Client) AddMember(ctx context.Context, id, raftAddr, apiAddr string) ([]*ticketv1.Member, error) {
	req := &ticketv1.AddMemberRequest{Member: &ticketv1.Member{Id: id, RaftAddr: raftAddr, ApiAddr: apiAddr, Voter: true}}
	return changeMembers(ctx, c, "add member", id, func(ctx context.Context, n *node) (*ticketv1.AddMemberResponse, error) {
		return n.cluster.AddMember(ctx, req)
	})
}

// RemoveMember removes the server id from the cluster and returns the
// members afterwards.
//
// Errors: ErrInvalidArgument, the server's error for a refused change, or
// the ctx error wrapping the last failure.
func (c *Client) RemoveMember(ctx context.Context, id string) ([]*ticketv1.Member, error) {
	req := &ticketv1.RemoveMemberRequest{Id: id}
	return changeMembers(ctx, c, "remove member", id, func(ctx context.Context, n *node) (*ticketv1.RemoveMemberResponse, error) {
		return n.cluster.RemoveMember(ctx, req)
	})
}

// changeMembers sends a membership change (op on server id) to the leader
// with retries and returns the members afterwards.
func changeMembers[R interface{ GetMembers() []*ticketv1.Member }](ctx context.Context, c *Client, op, id string, call func(context.Context, *node) (R, error)) ([]*ticketv1.Member, error) {
	spec := callSpec{op: op, key: id, toLeader: true, timeout: c.cfg.requestTimeout}
	res, _, err := invoke(ctx, c, spec, call)
	if err != nil {
		return nil, err
	}
	return res.GetMembers(), nil
}

// TransferLeader hands leadership to the voter id, or to any up-to-date
// voter when id is empty, and returns the new leader's id. The client then
// looks the leader up afresh.
//
// Errors: ErrInvalidArgument, the server's error for a refused transfer, or
// the ctx error wrapping the last failure.
func (c *Client) TransferLeader(ctx context.Context, id string) (string, error) {
	req := &ticketv1.TransferLeaderRequest{Id: id}
	spec := callSpec{op: "transfer leader", key: id, toLeader: true, timeout: c.cfg.requestTimeout}
	res, _, err := invoke(ctx, c, spec, func(ctx context.Context, n *node) (*ticketv1.TransferLeaderResponse, error) {
		return n.cluster.TransferLeader(ctx, req)
	})
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.leader = ""
	c.mu.Unlock()
	return res.GetLeaderId(), nil
}
