package e2e_test

import (
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// sessionIDs returns the ids of sessions, in order.
func sessionIDs(sessions []*ticketv1.SessionInfo) []uint64 {
	var ids []uint64
	for _, s := range sessions {
		ids = append(ids, s.GetSession())
	}
	return ids
}

// TestSessionReads runs three real nodes with client TLS, a policy and
// tokens, and checks GetSession and ListSessions: a session's TTL,
// remaining lease, principal and locks, through a follower as on the
// leader; a principal sees only its own sessions, and another principal's
// session is answered NOT_FOUND exactly as an unknown one; an admin sees
// every session; the principal and key-prefix filters and paging; a closed
// session is gone from both reads.
func TestSessionReads(t *testing.T) {
	t.Parallel() // its own cluster, ports and data dirs: beside the others (see matrix)
	c, dir := startAuthCluster(t, backends()[0])
	ctx := ctxT(t)
	leader := c.Leader(t)
	follower := (leader + 1) % c.Len()
	admin := clientsAs(t, c, dir, identity{cert: "e2e"})
	alice := clientsAs(t, c, dir, identity{cert: "alice"})
	bob := clientsAs(t, c, dir, identity{token: bobToken})

	a1, err := alice.lock[leader].CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 60_000})
	require.NoError(t, err)
	a2, err := alice.lock[leader].CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 30_000})
	require.NoError(t, err)
	b1, err := bob.lock[leader].CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 60_000})
	require.NoError(t, err)
	held, err := alice.lock[leader].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/jobs/a", Owner: "alice-a", Session: a1.GetSession()})
	require.NoError(t, err)
	_, err = bob.lock[leader].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/other", Owner: "bob-o", Session: b1.GetSession(),
		Mode: ticketv1.Mode_MODE_SHARED})
	require.NoError(t, err)

	got, err := alice.lock[follower].GetSession(ctx, &ticketv1.GetSessionRequest{Session: a1.GetSession()})
	require.NoError(t, err, "forwarded to the leader")
	s := got.GetSession()
	assert.Equal(t, a1.GetSession(), s.GetSession())
	assert.Equal(t, int64(60_000), s.GetTtlMs())
	assert.Equal(t, "alice", s.GetPrincipal())
	assert.Positive(t, s.GetRemainingMs())
	assert.LessOrEqual(t, s.GetRemainingMs(), int64(60_000))
	require.Len(t, s.GetLocks(), 1)
	assert.Equal(t, "shared/jobs/a", s.GetLocks()[0].GetKey())
	assert.Equal(t, held.GetToken(), s.GetLocks()[0].GetToken())
	assert.Equal(t, "alice-a", s.GetLocks()[0].GetOwner())

	// Bob asking for alice's session gets what an unknown id gets.
	for _, node := range []int{leader, follower} {
		_, errOther := bob.lock[node].GetSession(ctx, &ticketv1.GetSessionRequest{Session: a1.GetSession()})
		_, errUnknown := bob.lock[node].GetSession(ctx, &ticketv1.GetSessionRequest{Session: 1 << 40})
		require.Equal(t, connect.CodeNotFound, connect.CodeOf(errOther), "%v", errOther)
		require.Equal(t, connect.CodeNotFound, connect.CodeOf(errUnknown))
		assert.Equal(t, connect.CodeOf(errUnknown), connect.CodeOf(errOther))
	}
	got, err = admin.lock[follower].GetSession(ctx, &ticketv1.GetSessionRequest{Session: b1.GetSession()})
	require.NoError(t, err, "an admin sees every session")
	assert.Equal(t, "bob", got.GetSession().GetPrincipal())
	assert.Equal(t, ticketv1.Mode_MODE_SHARED, got.GetSession().GetLocks()[0].GetMode())
	_, err = alice.lock[leader].GetSession(ctx, &ticketv1.GetSessionRequest{})
	assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "session 0")

	list := func(cl authClients, req *ticketv1.ListSessionsRequest) *ticketv1.ListSessionsResponse {
		t.Helper()
		res, err := cl.lock[follower].ListSessions(ctx, req)
		require.NoError(t, err)
		return res
	}
	assert.Equal(t, []uint64{a1.GetSession(), a2.GetSession()}, sessionIDs(list(alice, &ticketv1.ListSessionsRequest{}).GetSessions()),
		"alice sees her own sessions only")
	assert.Empty(t, list(alice, &ticketv1.ListSessionsRequest{Principal: "bob"}).GetSessions(), "and none of bob's, even when asked")
	all := list(admin, &ticketv1.ListSessionsRequest{})
	assert.Equal(t, []uint64{a1.GetSession(), a2.GetSession(), b1.GetSession()}, sessionIDs(all.GetSessions()))
	assert.Positive(t, all.GetReadIndex())
	assert.Equal(t, []uint64{b1.GetSession()}, sessionIDs(list(admin, &ticketv1.ListSessionsRequest{Principal: "bob"}).GetSessions()))
	assert.Equal(t, []uint64{a1.GetSession()}, sessionIDs(list(admin, &ticketv1.ListSessionsRequest{KeyPrefix: "shared/jobs/"}).GetSessions()),
		"key_prefix keeps the sessions holding a lock under it")

	page := list(admin, &ticketv1.ListSessionsRequest{PageSize: 2})
	assert.Equal(t, []uint64{a1.GetSession(), a2.GetSession()}, sessionIDs(page.GetSessions()))
	require.NotEmpty(t, page.GetNextPageToken())
	page = list(admin, &ticketv1.ListSessionsRequest{PageSize: 2, PageToken: page.GetNextPageToken()})
	assert.Equal(t, []uint64{b1.GetSession()}, sessionIDs(page.GetSessions()))
	assert.Empty(t, page.GetNextPageToken())
	_, err = admin.lock[leader].ListSessions(ctx, &ticketv1.ListSessionsRequest{PageToken: "x"})
	assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))

	_, err = alice.lock[leader].CloseSession(ctx, &ticketv1.CloseSessionRequest{Session: a1.GetSession()})
	require.NoError(t, err)
	_, err = alice.lock[follower].GetSession(ctx, &ticketv1.GetSessionRequest{Session: a1.GetSession()})
	assert.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "a closed session is gone")
	assert.Equal(t, []uint64{a2.GetSession()}, sessionIDs(list(alice, &ticketv1.ListSessionsRequest{}).GetSessions()))
}
