package e2e_test

import (
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/security"
)

// TestRemovedMemberCannotForwardAPrincipal: forwarding follows the peer
// rule that identity is membership. A member's node certificate carrying a
// caller's principal (what a follower's forwarding sends) is believed by
// the leader; once that member is removed, the same certificate is refused
// (unauthenticated) and nothing changes.
func TestRemovedMemberCannotForwardAPrincipal(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		c, dir := startAuthCluster(t, backend)
		ctx := ctxT(t)
		leader := c.Leader(t)
		gone := (leader + 1) % c.Len()
		goneID := c.Node(gone).ID
		admin := clientsAs(t, c, dir, identity{cert: "e2e"})
		asNode := clientsAs(t, c, dir, identity{nodeCert: goneID, headers: map[string]string{security.PrincipalHeader: "alice"}})

		res, err := asNode.lock[leader].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/fwd", LeaseMs: 60_000, Owner: "alice-fwd"})
		require.NoError(t, err, "a member's certificate forwarding alice")
		_, err = asNode.lock[leader].Release(ctx, &ticketv1.ReleaseRequest{Key: "shared/fwd", Token: res.GetToken()})
		require.NoError(t, err)

		_, err = admin.cluster[leader].RemoveMember(ctx, &ticketv1.RemoveMemberRequest{Id: goneID})
		require.NoError(t, err)
		before := stateOf(t, c, admin, leader)
		_, err = asNode.lock[leader].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/fwd", LeaseMs: 60_000, Owner: "alice-fwd"})
		requireCode(t, connect.CodeUnauthenticated, err)
		requireSameState(t, before, stateOf(t, c, admin, leader))
	})
}
