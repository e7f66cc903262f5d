package e2e_test

import (
	"os"
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

// TestReplaceMemberWithAuthorization: the documented way to replace a
// member (RemoveMember, an empty data dir, --join, AddMember) works with
// client TLS, client-certificate auth and a policy on. The leader's
// reachability probe of the joiner's API carries the admin's principal
// from the leader's node certificate; the joiner, in no configuration yet,
// takes the members its --join member named for members, as its peer
// transport does, so it answers the probe and the admin's AddMember
// succeeds.
func TestReplaceMemberWithAuthorization(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		c, dir := startAuthCluster(t, backend)
		ctx := ctxT(t)
		leader := c.Leader(t)
		gone := (leader + 1) % c.Len()
		n := c.Node(gone)
		admin := clientsAs(t, c, dir, identity{cert: "e2e"})

		_, err := admin.cluster[leader].RemoveMember(ctx, &ticketv1.RemoveMemberRequest{Id: n.ID})
		require.NoError(t, err)
		c.Kill(gone)
		require.NoError(t, os.RemoveAll(n.DataDir))
		c.StartArgs(gone, replaceBootstrap(c.Args(gone), "--join", c.Node(leader).APIAddr))

		// Through a node that stayed (it forwards to the leader).
		stayed := (gone + 1) % c.Len()
		var last string
		eventually(t, func() bool {
			_, err := admin.cluster[stayed].AddMember(ctx, &ticketv1.AddMemberRequest{Member: &ticketv1.Member{
				Id: n.ID, RaftAddr: n.RaftAddr, ApiAddr: n.APIAddr, Voter: true}})
			if err != nil && err.Error() != last {
				last = err.Error()
				t.Logf("AddMember %s: %v", n.ID, err)
			}
			return err == nil
		}, "the admin's AddMember of the replaced member succeeds")
		eventually(t, func() bool {
			s, err := c.Status(gone)
			return err == nil && len(s.GetMembers()) == c.Len() && s.GetLeaderId() != ""
		}, "the replaced member is in the configuration and knows the leader")
	})
}
