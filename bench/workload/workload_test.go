package workload_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"

	"github.com/ticketd/ticketd/bench/workload"
	"github.com/ticketd/ticketd/core"
)

// applier is a core.Consensus below the layer under test: it applies each
// proposal straight to a real core.StateMachine, as a one-node log would.
type applier struct {
	core.Consensus // unused methods panic
	mu             sync.Mutex
	sm             *core.StateMachine
	index          uint64
	proposals      int
}

func (a *applier) Propose(ctx context.Context, cmd core.Command) (core.Result, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.index++
	a.proposals++
	return a.sm.Apply(a.index, cmd)
}

func TestCommitsAlternateGrantAndRelease(t *testing.T) {
	a := &applier{sm: core.NewStateMachine()}
	op := workload.Commits(func() core.Consensus { return a }, 3, "t")
	ctx := context.Background()
	for w := range 3 {
		require.NoError(t, op(ctx, w)) // grant
	}
	require.Equal(t, 3, a.sm.Len())
	for w := range 3 {
		require.NoError(t, op(ctx, w)) // release
		require.NoError(t, op(ctx, w)) // grant again
	}
	require.Equal(t, 9, a.proposals, "one proposal per operation")
	require.Equal(t, 3, a.sm.Len())
	require.EqualValues(t, 6, a.sm.LastToken())
}

func TestCommitsRejectsUnexpectedResult(t *testing.T) {
	a := &applier{sm: core.NewStateMachine()}
	_, err := a.Propose(context.Background(), core.Grant("bench/t/w0", 1000, "someone-else"))
	require.NoError(t, err)
	op := workload.Commits(func() core.Consensus { return a }, 1, "t")
	require.ErrorIs(t, op(context.Background(), 0), workload.ErrUnexpected)
}

func TestCommitsNoLeader(t *testing.T) {
	op := workload.Commits(func() core.Consensus { return nil }, 1, "t")
	require.ErrorIs(t, op(context.Background(), 0), workload.ErrNoLeader)
}

// lockServer serves Acquire and Release from a real core.StateMachine.
type lockServer struct {
	ticketv1connect.UnimplementedLockServiceHandler
	a *applier
}

func (s *lockServer) Acquire(ctx context.Context, req *ticketv1.AcquireRequest) (*ticketv1.AcquireResponse, error) {
	res, err := s.a.Propose(ctx, core.Grant(req.GetKey(), req.GetLeaseMs(), req.GetOwner()))
	if err != nil {
		return nil, err
	}
	if res.Outcome != core.OutcomeGranted {
		return nil, connect.NewError(connect.CodeAlreadyExists, errors.New("held"))
	}
	return &ticketv1.AcquireResponse{Token: res.Token, LeaseMs: res.LeaseMS}, nil
}

func (s *lockServer) Release(ctx context.Context, req *ticketv1.ReleaseRequest) (*ticketv1.ReleaseResponse, error) {
	res, err := s.a.Propose(ctx, core.Release(req.GetKey(), req.GetToken()))
	if err != nil {
		return nil, err
	}
	if res.Outcome != core.OutcomeReleased {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("no such lock"))
	}
	return &ticketv1.ReleaseResponse{}, nil
}

func TestLocksCycle(t *testing.T) {
	a := &applier{sm: core.NewStateMachine()}
	mux := http.NewServeMux()
	mux.Handle(ticketv1connect.NewLockServiceHandler(&lockServer{a: a}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := ticketv1connect.NewLockServiceClient(srv.Client(), srv.URL)

	op := workload.Locks(client, 2, "t")
	for range 3 {
		for w := range 2 {
			require.NoError(t, op(context.Background(), w))
		}
	}
	require.Equal(t, 12, a.proposals, "Acquire and Release per cycle")
	require.Zero(t, a.sm.Len(), "every cycle releases its lock")

	// A key held by someone else makes the cycle fail, not pass silently.
	_, err := a.Propose(context.Background(), core.Grant("bench/t/lock/w0", 1000, "someone-else"))
	require.NoError(t, err)
	require.Error(t, op(context.Background(), 0))
}

func (s *lockServer) Renew(ctx context.Context, req *ticketv1.RenewRequest) (*ticketv1.RenewResponse, error) {
	res, err := s.a.Propose(ctx, core.Renew(req.GetKey(), req.GetToken()))
	if err != nil {
		return nil, err
	}
	if res.Outcome != core.OutcomeRenewed {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("no such lock"))
	}
	return &ticketv1.RenewResponse{LeaseMs: res.LeaseMS}, nil
}

func TestRenewsOneCommitEach(t *testing.T) {
	a := &applier{sm: core.NewStateMachine()}
	mux := http.NewServeMux()
	mux.Handle(ticketv1connect.NewLockServiceHandler(&lockServer{a: a}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := ticketv1connect.NewLockServiceClient(srv.Client(), srv.URL)

	op, err := workload.Renews(context.Background(), client, 2, "t")
	require.NoError(t, err)
	require.Equal(t, 2, a.sm.Len(), "one lock per worker, acquired up front")
	for range 3 {
		for w := range 2 {
			require.NoError(t, op(context.Background(), w))
		}
	}
	require.Equal(t, 2+6, a.proposals, "one Renew commit per operation")

	// A renewal of a lock that is gone fails, not passes silently.
	lk, ok := a.sm.Get("bench/t/renew/w0")
	require.True(t, ok)
	_, err = a.Propose(context.Background(), core.Release(lk.Key, lk.Token))
	require.NoError(t, err)
	require.Error(t, op(context.Background(), 0))
}

func TestHandoffsCycle(t *testing.T) {
	a := &applier{sm: core.NewStateMachine()}
	mux := http.NewServeMux()
	mux.Handle(ticketv1connect.NewLockServiceHandler(&lockServer{a: a}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := ticketv1connect.NewLockServiceClient(srv.Client(), srv.URL)

	cycle := workload.Handoffs(client, "t")
	var tokens []uint64
	for w := range 3 {
		c, err := cycle(context.Background(), w)
		require.NoError(t, err)
		require.False(t, c.Released.Before(c.Acquired))
		tokens = append(tokens, c.Token)
	}
	require.Equal(t, []uint64{1, 2, 3}, tokens, "every worker takes the one key in turn")
	require.Zero(t, a.sm.Len(), "every cycle releases the key")

	// The key held by someone else (a fake that does not wait) fails the cycle.
	_, err := a.Propose(context.Background(), core.Grant("bench/t/handoff", 1000, "someone-else"))
	require.NoError(t, err)
	_, err = cycle(context.Background(), 0)
	require.Error(t, err)
}
