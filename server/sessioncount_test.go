package server_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
	"github.com/ticketd/ticketd/server/security"
)

// sessionPolicy lets alice, bob and carol lock under s/ (and so open
// sessions); their bearer tokens are sessionTokens.
const sessionPolicy = `
rules:
  - principal: alice
    prefix: "s/"
    allow: [lock]
  - principal: bob
    prefix: "s/"
    allow: [lock]
  - principal: carol
    prefix: "s/"
    allow: [lock]
`

var sessionTokens = map[string]string{
	"alice": "alice-0123456789abcdef",
	"bob":   "bob-0123456789abcdef",
	"carol": "carol-0123456789abcdef",
	"ops":   "ops-0123456789abcdef", // no rules: Status only (the test cluster's own clients)
}

// withSessionAuth turns authorization on with sessionPolicy and
// sessionTokens, written into a directory of t.
func withSessionAuth(t *testing.T, c *config.Config) {
	dir := t.TempDir()
	c.AuthPolicyFile = filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(c.AuthPolicyFile, []byte(sessionPolicy), 0o600))
	tokens := "tokens:\n"
	for p, tok := range sessionTokens {
		tokens += "  - principal: " + p + "\n    sha256: " + security.TokenDigest(tok) + "\n"
	}
	c.AuthTokensFile = filepath.Join(dir, "tokens.yaml")
	require.NoError(t, os.WriteFile(c.AuthTokensFile, []byte(tokens), 0o600))
}

// bearer authenticates a client's calls, unary and streaming, as
// principal with its token.
func bearer(principal string) connect.ClientOption {
	return connect.WithInterceptors(bearerAuth("Bearer " + sessionTokens[principal]))
}

// bearerAuth sets its Authorization header on every call a client makes.
type bearerAuth string

func (h bearerAuth) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", string(h))
		return next(ctx, req)
	}
}

func (h bearerAuth) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", string(h))
		return conn
	}
}

func (h bearerAuth) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// lockAs is a LockService client of in that authenticates as principal.
func lockAs(in *nodetest.Instance, principal string) ticketv1connect.LockServiceClient {
	return ticketv1connect.NewLockServiceClient(nodetest.H2CClient(), "http://"+in.Addr, bearer(principal))
}

// openSession opens a session of 10 s and returns its id, or the error.
func openSession(ctx context.Context, c ticketv1connect.LockServiceClient) (uint64, error) {
	res, err := c.CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 10_000})
	return res.GetSession(), err
}

// TestSessionCapPerPrincipal: with authorization on, one principal cannot
// open more than limits.max_sessions_per_principal sessions (creates in
// flight included), while the others still can up to limits.max_sessions;
// closing a session frees its place; Status and /metrics count the open
// sessions (docs/security.md#quotas).
func TestSessionCapPerPrincipal(t *testing.T) {
	t.Parallel()
	in, mem := memNode(t, withConfig(func(c *config.Config) {
		withSessionAuth(t, c)
		c.Limits.MaxSessionsPerPrincipal = 3
		c.Limits.MaxSessions = 5
	}), nodetest.WithClientOptions(bearer("ops")))
	ctx := ctxT(t)
	alice, bob, carol := lockAs(in, "alice"), lockAs(in, "bob"), lockAs(in, "carol")

	// Three creates of alice in flight at once fill her cap: a fourth is
	// refused before it is proposed.
	mem.HoldProposals(true)
	type created struct {
		id  uint64
		err error
	}
	out := make(chan created, 3)
	for range 3 {
		go func() {
			id, err := openSession(ctx, alice)
			out <- created{id, err}
		}()
	}
	eventually(t, func() bool { return len(mem.Log()) == 3 }, "three creates in flight")
	_, err := openSession(ctx, alice)
	requireCode(t, connect.CodeResourceExhausted, err)
	assert.Contains(t, err.Error(), `principal "alice" reached its cap of 3 (limits.max_sessions_per_principal)`)
	require.Len(t, mem.Log(), 3, "the refused create proposed nothing")
	mem.HoldProposals(false)
	var aliceIDs []uint64
	for range 3 {
		c := <-out
		require.NoError(t, c.err)
		aliceIDs = append(aliceIDs, c.id)
	}

	// Applied, they still count.
	_, err = openSession(ctx, alice)
	requireCode(t, connect.CodeResourceExhausted, err)

	// Bob is not locked out by alice; the cluster cap still holds for all.
	for range 2 {
		_, err := openSession(ctx, bob)
		require.NoError(t, err)
	}
	_, err = openSession(ctx, carol)
	requireCode(t, connect.CodeResourceExhausted, err)
	assert.Contains(t, err.Error(), "reached its cap of 5 (limits.max_sessions)")

	st, err := in.Cluster.Status(ctx, &ticketv1.StatusRequest{})
	require.NoError(t, err)
	assert.Equal(t, int64(5), st.GetSessionsOpen())
	assert.Equal(t, 5.0, metric(t, in, "ticketd_sessions"))

	// A session closed frees its place, for its principal and the cluster.
	_, err = alice.CloseSession(ctx, &ticketv1.CloseSessionRequest{Session: aliceIDs[0]})
	require.NoError(t, err)
	_, err = openSession(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, 5.0, metric(t, in, "ticketd_sessions"))
}

// TestSessionCapWithoutAuthorization: with authorization off every client is
// one anonymous principal, and only limits.max_sessions applies.
func TestSessionCapWithoutAuthorization(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t, withConfig(func(c *config.Config) {
		c.Limits.MaxSessionsPerPrincipal = 1
		c.Limits.MaxSessions = 3
	}))
	ctx := ctxT(t)
	for range 3 {
		_, err := openSession(ctx, in.Lock)
		require.NoError(t, err)
	}
	_, err := openSession(ctx, in.Lock)
	requireCode(t, connect.CodeResourceExhausted, err)
	assert.Contains(t, err.Error(), "(limits.max_sessions)")
}
