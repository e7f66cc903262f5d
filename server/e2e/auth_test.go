package e2e_test

import (
	"context"
	"fmt"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/server/forward"
	"github.com/ticketd/ticketd/server/security"
)

// authState is everything a refused request must leave as it was: the
// lock table (ListLocks, as the admin sees it), last_token, the log, the
// membership and the leader.
type authState struct {
	view    view
	locks   string
	members string
	leader  string
}

func stateOf(t *testing.T, c *ticketdtest.Cluster, admin authClients, leader int) authState {
	t.Helper()
	ctx := ctxT(t)
	ls, err := admin.lock[leader].ListLocks(ctx, &ticketv1.ListLocksRequest{})
	require.NoError(t, err)
	st, err := c.Status(leader)
	require.NoError(t, err)
	s := authState{view: status(t, c, leader), leader: st.GetLeaderId()}
	for _, l := range ls.GetLocks() {
		s.locks += fmt.Sprintf("%s=%d/%s;", l.GetKey(), l.GetToken(), l.GetOwner())
	}
	for _, m := range st.GetMembers() {
		s.members += fmt.Sprintf("%s@%s/%s;", m.GetId(), m.GetRaftAddr(), m.GetApiAddr())
	}
	return s
}

func requireSameState(t *testing.T, before, after authState) {
	t.Helper()
	requireUnchanged(t, before.view, after.view)
	require.Equal(t, before.locks, after.locks, "lock table changed")
	require.Equal(t, before.members, after.members, "membership changed")
	require.Equal(t, before.leader, after.leader, "leader changed")
}

// TestAuthorization runs three real nodes with client TLS, peer mutual TLS,
// a policy and a tokens file, and checks the refusals of
// docs/security.md#locks-are-bound-to-their-principal: another
// principal's lock cannot be renewed or released (by token) or taken over
// (by owner), unauthenticated and wrong-token calls are refused, a
// non-admin cannot change membership or leadership, a client cannot assert
// a principal, an admin can force-release; every refusal leaves the lock
// table, the log and the membership as they were.
func TestAuthorization(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		c, dir := startAuthCluster(t, backend)
		ctx := ctxT(t)
		leader := c.Leader(t)
		follower := (leader + 1) % c.Len()

		admin := clientsAs(t, c, dir, identity{cert: "e2e"})
		alice := clientsAs(t, c, dir, identity{cert: "alice"})
		bob := clientsAs(t, c, dir, identity{token: bobToken})
		anon := clientsAs(t, c, dir, identity{})
		wrong := clientsAs(t, c, dir, identity{token: wrongToken})
		mallory := clientsAs(t, c, dir, identity{cert: "mallory"}) // no rule names mallory

		// alice takes shared/a (certificate principal).
		got, err := alice.lock[leader].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/a", LeaseMs: 60_000, Owner: "alice-1"})
		require.NoError(t, err)
		aliceToken := got.GetToken()

		refused := func(t *testing.T, code connect.Code, call func() error) {
			t.Helper()
			before := stateOf(t, c, admin, leader)
			requireCode(t, code, call())
			requireSameState(t, before, stateOf(t, c, admin, leader))
		}

		t.Run("other_principal_cannot_renew_or_release_by_token", func(t *testing.T) {
			for _, node := range []int{leader, follower} {
				refused(t, connect.CodePermissionDenied, func() error {
					_, err := bob.lock[node].Renew(ctx, &ticketv1.RenewRequest{Key: "shared/a", Token: aliceToken})
					return err
				})
				refused(t, connect.CodePermissionDenied, func() error {
					_, err := bob.lock[node].Release(ctx, &ticketv1.ReleaseRequest{Key: "shared/a", Token: aliceToken})
					return err
				})
			}
		})
		t.Run("other_principal_same_owner_is_not_a_retry", func(t *testing.T) {
			for _, node := range []int{leader, follower} {
				refused(t, connect.CodeAlreadyExists, func() error {
					_, err := bob.lock[node].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/a", LeaseMs: 60_000, Owner: "alice-1"})
					return err
				})
			}
		})
		t.Run("same_principal_same_owner_is_a_retry", func(t *testing.T) {
			res, err := alice.lock[follower].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/a", LeaseMs: 60_000, Owner: "alice-1"})
			require.NoError(t, err)
			assert.Equal(t, aliceToken, res.GetToken())
		})
		t.Run("unauthenticated_refused", func(t *testing.T) {
			for _, node := range []int{leader, follower} {
				refused(t, connect.CodeUnauthenticated, func() error {
					_, err := anon.lock[node].Release(ctx, &ticketv1.ReleaseRequest{Key: "shared/a", Token: aliceToken})
					return err
				})
				refused(t, connect.CodeUnauthenticated, func() error {
					_, err := anon.cluster[node].Status(ctx, &ticketv1.StatusRequest{})
					return err
				})
			}
		})
		t.Run("wrong_token_refused", func(t *testing.T) {
			refused(t, connect.CodeUnauthenticated, func() error {
				_, err := wrong.lock[leader].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/w", LeaseMs: 60_000})
				return err
			})
		})
		t.Run("outside_policy_refused", func(t *testing.T) {
			refused(t, connect.CodePermissionDenied, func() error {
				_, err := alice.lock[leader].Acquire(ctx, &ticketv1.AcquireRequest{Key: "other/x", LeaseMs: 60_000})
				return err
			})
			refused(t, connect.CodePermissionDenied, func() error {
				_, err := mallory.lock[follower].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/m", LeaseMs: 60_000})
				return err
			})
			refused(t, connect.CodePermissionDenied, func() error {
				_, err := mallory.lock[leader].ListLocks(ctx, &ticketv1.ListLocksRequest{Prefix: "shared/"})
				return err
			})
			_, err := mallory.lock[leader].ListLocks(ctx, &ticketv1.ListLocksRequest{Prefix: "public/"})
			require.NoError(t, err, "\"*\" may read public/")
			_, err = mallory.cluster[follower].Status(ctx, &ticketv1.StatusRequest{})
			require.NoError(t, err, "any authenticated principal reads Status")
		})
		t.Run("watch_needs_read_on_the_prefix", func(t *testing.T) {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			st, err := mallory.lock[follower].Watch(wctx, &ticketv1.WatchRequest{Prefix: "shared/"})
			require.NoError(t, err)
			require.False(t, st.Receive(), "no event for a prefix mallory may not read")
			requireCode(t, connect.CodePermissionDenied, st.Err())
			_ = st.Close()
			st, err = anon.lock[follower].Watch(wctx, &ticketv1.WatchRequest{Prefix: "public/"})
			require.NoError(t, err)
			require.False(t, st.Receive())
			requireCode(t, connect.CodeUnauthenticated, st.Err())
			_ = st.Close()
			st, err = alice.lock[follower].Watch(wctx, &ticketv1.WatchRequest{Prefix: "shared/", IncludeExisting: true})
			require.NoError(t, err)
			require.True(t, st.Receive(), "alice reads shared/: %v", st.Err())
			assert.Equal(t, "shared/a", st.Msg().GetKey())
			cancel()
			_ = st.Close()
		})
		t.Run("non_admin_cannot_change_membership_or_leadership", func(t *testing.T) {
			for _, cl := range []authClients{alice, bob} {
				for _, node := range []int{leader, follower} {
					refused(t, connect.CodePermissionDenied, func() error {
						_, err := cl.cluster[node].AddMember(ctx, &ticketv1.AddMemberRequest{Member: &ticketv1.Member{
							Id: "n9", RaftAddr: ticketdtest.FreeAddr(t), ApiAddr: ticketdtest.FreeAddr(t), Voter: true}})
						return err
					})
					refused(t, connect.CodePermissionDenied, func() error {
						_, err := cl.cluster[node].RemoveMember(ctx, &ticketv1.RemoveMemberRequest{Id: c.Node(follower).ID})
						return err
					})
					refused(t, connect.CodePermissionDenied, func() error {
						_, err := cl.cluster[node].TransferLeader(ctx, &ticketv1.TransferLeaderRequest{Id: c.Node(follower).ID})
						return err
					})
				}
			}
		})
		t.Run("client_cannot_assert_a_principal", func(t *testing.T) {
			spoofs := map[string]identity{
				"certificate": {cert: "alice", headers: map[string]string{security.PrincipalHeader: "e2e"}},
				"certificate_and_forwarded_mark": {cert: "alice", headers: map[string]string{
					security.PrincipalHeader: "e2e", forward.Header: c.Node(follower).ID}},
				"token":         {token: bobToken, headers: map[string]string{security.PrincipalHeader: "alice"}},
				"no_credential": {headers: map[string]string{security.PrincipalHeader: "e2e"}},
			}
			for name, id := range spoofs {
				t.Run(name, func(t *testing.T) {
					sp := clientsAs(t, c, dir, id)
					for _, node := range []int{leader, follower} {
						refused(t, connect.CodeUnauthenticated, func() error {
							_, err := sp.lock[node].Release(ctx, &ticketv1.ReleaseRequest{Key: "shared/a", Token: aliceToken})
							return err
						})
						refused(t, connect.CodeUnauthenticated, func() error {
							_, err := sp.cluster[node].RemoveMember(ctx, &ticketv1.RemoveMemberRequest{Id: c.Node(follower).ID})
							return err
						})
					}
				})
			}
		})
		t.Run("forwarded_requests_keep_the_callers_principal", func(t *testing.T) {
			// bob (token) takes a lock through a follower: it is bob's, not
			// the forwarding node's, so alice cannot release it through the
			// follower either, and bob can.
			res, err := bob.lock[follower].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/b", LeaseMs: 60_000, Owner: "bob-1"})
			require.NoError(t, err)
			refused(t, connect.CodePermissionDenied, func() error {
				_, err := alice.lock[follower].Release(ctx, &ticketv1.ReleaseRequest{Key: "shared/b", Token: res.GetToken()})
				return err
			})
			_, err = bob.lock[follower].Renew(ctx, &ticketv1.RenewRequest{Key: "shared/b", Token: res.GetToken()})
			require.NoError(t, err)
			_, err = bob.lock[follower].Release(ctx, &ticketv1.ReleaseRequest{Key: "shared/b", Token: res.GetToken()})
			require.NoError(t, err)
			// alice (certificate) through the follower: her principal travels
			// in the principal header from the node's certificate.
			res, err = alice.lock[follower].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/c", LeaseMs: 60_000, Owner: "alice-2"})
			require.NoError(t, err)
			refused(t, connect.CodePermissionDenied, func() error {
				_, err := bob.lock[leader].Release(ctx, &ticketv1.ReleaseRequest{Key: "shared/c", Token: res.GetToken()})
				return err
			})
			_, err = alice.lock[leader].Release(ctx, &ticketv1.ReleaseRequest{Key: "shared/c", Token: res.GetToken()})
			require.NoError(t, err)
		})
		t.Run("owner_renews_and_releases", func(t *testing.T) {
			_, err := alice.lock[follower].Renew(ctx, &ticketv1.RenewRequest{Key: "shared/a", Token: aliceToken})
			require.NoError(t, err)
		})
		t.Run("admin_force_release", func(t *testing.T) {
			refused(t, connect.CodePermissionDenied, func() error {
				_, err := bob.lock[leader].Release(ctx, &ticketv1.ReleaseRequest{Key: "shared/a", Force: true})
				return err
			})
			_, err := admin.lock[follower].Release(ctx, &ticketv1.ReleaseRequest{Key: "shared/a", Force: true})
			require.NoError(t, err)
			gl, err := admin.lock[leader].GetLock(ctx, &ticketv1.GetLockRequest{Key: "shared/a"})
			require.NoError(t, err)
			assert.False(t, gl.GetHeld(), "force-released")
			_, err = admin.lock[leader].Release(ctx, &ticketv1.ReleaseRequest{Key: "shared/a", Force: true})
			requireCode(t, connect.CodeNotFound, err)
		})
		t.Run("admin_changes_membership_token_without_rule_cannot", func(t *testing.T) {
			ops := clientsAs(t, c, dir, identity{token: opsToken})
			refused(t, connect.CodePermissionDenied, func() error {
				_, err := ops.cluster[leader].TransferLeader(ctx, &ticketv1.TransferLeaderRequest{})
				return err
			})
			// The admin re-adds a member with its own addresses, through a
			// follower: the leader's probes of the members carry the
			// admin's principal and pass.
			f := c.Node(follower)
			_, err := admin.cluster[follower].AddMember(ctx, &ticketv1.AddMemberRequest{Member: &ticketv1.Member{
				Id: f.ID, RaftAddr: f.RaftAddr, ApiAddr: f.APIAddr, Voter: true}})
			require.NoError(t, err)
		})
	})
}
