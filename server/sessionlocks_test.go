package server_test

import (
	"fmt"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// TestMaxLocksPerSession: with limits.max_locks_per_session 3, a fourth
// Acquire under a session is ResourceExhausted and changes nothing (the log
// does not grow), also while the third grant is still in flight; an
// idempotent retry of a lock the session holds is still answered; locks
// under another session or none do not count; releasing one makes room.
func TestMaxLocksPerSession(t *testing.T) {
	t.Parallel()
	in, mem := memNode(t, withConfig(func(c *config.Config) { c.Limits.MaxLocksPerSession = 3 }))
	ctx := ctxT(t)
	id := createSession(t, in, 60_000)
	other := createSession(t, in, 60_000)
	a := acquireUnder(t, in, "cap/a", id)
	acquireUnder(t, in, "cap/b", id)
	acquireUnder(t, in, "cap/x", other)
	_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "cap/free", LeaseMs: 60_000, Owner: "free"})
	require.NoError(t, err, "a lock under no session does not count")

	// The third grant is proposed and held in flight: it counts.
	mem.HoldProposals(true)
	out := make(chan acquired, 1)
	acquireAsync(ctx, in, "c", &ticketv1.AcquireRequest{Key: "cap/c", Owner: "cap/c", Session: id}, out)
	eventually(t, func() bool {
		log := mem.Log()
		return len(log) > 0 && log[len(log)-1].Cmd.Key == "cap/c"
	}, "the third grant is in flight")
	logLen := len(mem.Log())
	_, err = in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "cap/d", Owner: "cap/d", Session: id})
	requireCode(t, connect.CodeResourceExhausted, err)
	assert.Contains(t, err.Error(), "limits.max_locks_per_session")
	assert.Len(t, mem.Log(), logLen, "refused before anything is proposed")
	mem.HoldProposals(false)
	c := recvAcquired(t, out)
	require.NoError(t, c.err)

	before := state(t, in)
	logLen = len(mem.Log())
	for _, req := range []*ticketv1.AcquireRequest{
		{Key: "cap/d", Owner: "cap/d", Session: id},
		{Key: "cap/a", Owner: "someone-else", Session: id, Mode: ticketv1.Mode_MODE_SHARED},
	} {
		_, err = in.Lock.Acquire(ctx, req)
		requireCode(t, connect.CodeResourceExhausted, err)
	}
	assert.Equal(t, before, state(t, in), "the lock table did not change")
	assert.Len(t, mem.Log(), logLen, "the log did not grow")

	retry, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "cap/a", Owner: "cap/a", Session: id})
	require.NoError(t, err, "an idempotent retry adds no lock")
	assert.Equal(t, a.GetToken(), retry.GetToken())
	acquireUnder(t, in, "cap/y", other)

	_, err = in.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "cap/a", Token: a.GetToken()})
	require.NoError(t, err)
	acquireUnder(t, in, "cap/d", id)
	_, err = in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "cap/e", Owner: "cap/e", Session: id})
	requireCode(t, connect.CodeResourceExhausted, err)
	require.Equal(t, fmt.Sprint([]string{"cap/b", "cap/c", "cap/d"}), fmt.Sprint(sessionKeys(t, in, id)))
}

// sessionKeys lists the keys held under session id, in key order.
func sessionKeys(t *testing.T, in *nodetest.Instance, id uint64) []string {
	t.Helper()
	res, err := in.Lock.ListLocks(ctxT(t), &ticketv1.ListLocksRequest{Prefix: "cap/"})
	require.NoError(t, err)
	var keys []string
	for _, lk := range res.GetLocks() {
		for _, h := range lk.GetHolders() {
			if h.GetSession() == id {
				keys = append(keys, lk.GetKey())
			}
		}
	}
	return keys
}
