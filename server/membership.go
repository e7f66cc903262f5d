package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// probeTimeout bounds one probe of a member's API (bytes-free Status call).
const probeTimeout = 2 * time.Second

// probeMember reports whether the API at addr answers Status as member id,
// over the forwarder's transport: with TLS its certificate must be valid for
// addr's host under the cluster's CAs. An address that does not answer, or
// answers as another node, is not that member. It returns the member's
// Status, or nil for this node's own id and address (not asked).
func (n *Node) probeMember(ctx context.Context, id, addr string) (*ticketv1.StatusResponse, error) {
	if id == n.cfg.ID && addr == n.cfg.APIAddr {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	st, err := n.fwd.Cluster(addr).Status(ctx, &ticketv1.StatusRequest{})
	if err != nil {
		return nil, fmt.Errorf("%w: api_addr %s of %q does not answer: %v", ErrUnsafeMembership, addr, id, err)
	}
	if st.GetNodeId() != id {
		return nil, fmt.Errorf("%w: api_addr %s answers as %q, not %q", ErrUnsafeMembership, addr, st.GetNodeId(), id)
	}
	return st, nil
}

// upVoters counts the voters among members that answer a probe at their
// recorded API address (this node always counts), probing in parallel.
func (n *Node) upVoters(ctx context.Context, members []core.Member) int {
	var (
		wg sync.WaitGroup
		mu sync.Mutex
		up int
	)
	for _, m := range members {
		if !m.Voter {
			continue
		}
		if m.ID == n.cfg.ID {
			mu.Lock()
			up++
			mu.Unlock()
			continue
		}
		addr, _ := n.sm.MemberAPIAddr(m.ID)
		if addr == "" {
			continue // unknown API address: cannot show it is up
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := n.probeMember(ctx, m.ID, addr); err == nil {
				mu.Lock()
				up++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return up
}

// checkQuorumAfter refuses a change whose resulting voter set (after) would
// not have a quorum among the voters that are up now, the new member
// included when newUp (etcd's strict reconfig check: a change must leave the
// cluster able to commit).
func (n *Node) checkQuorumAfter(ctx context.Context, after []core.Member, newID string, newUp bool) error {
	voters := 0
	var others []core.Member
	for _, m := range after {
		if !m.Voter {
			continue
		}
		voters++
		if m.ID != newID {
			others = append(others, m)
		}
	}
	up := n.upVoters(ctx, others)
	if newUp && newID != "" {
		up++
	}
	if quorum := voters/2 + 1; up < quorum {
		return fmt.Errorf("%w: after the change %d of %d voters would be up, quorum is %d", ErrUnsafeMembership, up, voters, quorum)
	}
	return nil
}

// checkAdd is AddMember's safety check on the leader: the new (or moved)
// member's API address answers as that member, the member applies every
// command version this leader may have written (admitCommandVersion), and
// the configuration after the change keeps a quorum of members that are up.
func (n *Node) checkAdd(ctx context.Context, m core.Member, apiAddr string) error {
	st, err := n.probeMember(ctx, m.ID, apiAddr)
	if err != nil {
		return err
	}
	if st != nil {
		if err := n.admitCommandVersion(m.ID, commandVersionOf(st)); err != nil {
			return err
		}
	}
	after := []core.Member{}
	for _, cur := range n.raft.Status().Members {
		if cur.ID != m.ID {
			after = append(after, cur)
		}
	}
	after = append(after, m)
	return n.checkQuorumAfter(ctx, after, m.ID, true)
}

// checkRemove is RemoveMember's safety check on the leader: the remaining
// voters that are up still form a quorum of the remaining configuration.
func (n *Node) checkRemove(ctx context.Context, id string) error {
	after := []core.Member{}
	for _, cur := range n.raft.Status().Members {
		if cur.ID != id {
			after = append(after, cur)
		}
	}
	return n.checkQuorumAfter(ctx, after, "", false)
}
