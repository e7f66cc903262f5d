package forward_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/forward"
)

// leader is a LockService that records what it sees. Only Acquire and
// Release are used; the embedded unimplemented handler answers the rest.
type leader struct {
	ticketv1connect.UnimplementedLockServiceHandler
	forwarded chan bool
	block     chan struct{}
	cancelled chan struct{}
}

func (l *leader) Acquire(ctx context.Context, req *ticketv1.AcquireRequest) (*ticketv1.AcquireResponse, error) {
	l.forwarded <- forward.Forwarded(ctx)
	if l.block != nil {
		select {
		case <-l.block:
		case <-ctx.Done():
			close(l.cancelled)
			return nil, ctx.Err()
		}
	}
	return &ticketv1.AcquireResponse{Token: 7, LeaseMs: req.GetLeaseMs()}, nil
}

func (l *leader) Release(ctx context.Context, req *ticketv1.ReleaseRequest) (*ticketv1.ReleaseResponse, error) {
	l.forwarded <- forward.Forwarded(ctx)
	e := connect.NewError(connect.CodeUnavailable, errors.New("not leader"))
	d, err := connect.NewErrorDetail(&ticketv1.LeaderHint{LeaderId: "n9", LeaderAddr: "127.0.0.1:9"})
	if err != nil {
		return nil, err
	}
	e.AddDetail(d)
	e.Meta().Set("X-Leader-Only", "1")
	return nil, e
}

// follower forwards everything to the leader at addr.
type follower struct {
	ticketv1connect.UnimplementedLockServiceHandler
	f    *forward.Forwarder
	addr string
}

func (s *follower) Acquire(ctx context.Context, req *ticketv1.AcquireRequest) (*ticketv1.AcquireResponse, error) {
	return forward.Call(ctx, s.f, "n1", s.f.Lock(s.addr).Acquire, req)
}

func (s *follower) Release(ctx context.Context, req *ticketv1.ReleaseRequest) (*ticketv1.ReleaseResponse, error) {
	return forward.Call(ctx, s.f, "n1", s.f.Lock(s.addr).Release, req)
}

// serve serves h over h2c on a loopback port and returns its address.
func serve(t *testing.T, svc ticketv1connect.LockServiceHandler) string {
	mux := http.NewServeMux()
	mux.Handle(ticketv1connect.NewLockServiceHandler(svc))
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: &p}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func setup(t *testing.T, l *leader) (ticketv1connect.LockServiceClient, *leader) {
	leaderAddr := serve(t, l)
	f := forward.New(forward.Config{Self: "n2"})
	t.Cleanup(f.Close)
	followerAddr := serve(t, &follower{f: f, addr: leaderAddr})
	return ticketv1connect.NewLockServiceClient(http.DefaultClient, "http://"+followerAddr), l
}

func TestForwardMarksAndReturns(t *testing.T) {
	client, l := setup(t, &leader{forwarded: make(chan bool, 1)})
	ctx, ci := connect.NewClientContext(context.Background())
	res, err := client.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 1000})
	require.NoError(t, err)
	assert.Equal(t, uint64(7), res.GetToken())
	assert.True(t, <-l.forwarded, "the leader sees the forwarded mark")
	assert.Equal(t, "n1", ci.ResponseHeader().Get(forward.LeaderHeader))
}

func TestDirectRequestIsNotForwarded(t *testing.T) {
	l := &leader{forwarded: make(chan bool, 1)}
	addr := serve(t, l)
	client := ticketv1connect.NewLockServiceClient(http.DefaultClient, "http://"+addr)
	_, err := client.Acquire(context.Background(), &ticketv1.AcquireRequest{Key: "k"})
	require.NoError(t, err)
	assert.False(t, <-l.forwarded)
}

func TestForwardKeepsCodeAndDetails(t *testing.T) {
	client, _ := setup(t, &leader{forwarded: make(chan bool, 1)})
	ctx, ci := connect.NewClientContext(context.Background())
	_, err := client.Release(ctx, &ticketv1.ReleaseRequest{Key: "k", Token: 1})
	require.Equal(t, connect.CodeUnavailable, connect.CodeOf(err))
	var ce *connect.Error
	require.ErrorAs(t, err, &ce)
	require.Len(t, ce.Details(), 1)
	v, derr := ce.Details()[0].Value()
	require.NoError(t, derr)
	hint, ok := v.(*ticketv1.LeaderHint)
	require.True(t, ok)
	assert.Equal(t, "n9", hint.GetLeaderId())
	assert.Empty(t, ci.ResponseHeader().Get("X-Leader-Only"), "the leader's metadata is not copied")
}

func TestClientGoneCancelsForwardedCall(t *testing.T) {
	l := &leader{forwarded: make(chan bool, 1), block: make(chan struct{}), cancelled: make(chan struct{})}
	client, _ := setup(t, l)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := client.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k"})
		errc <- err
	}()
	<-l.forwarded
	cancel()
	select {
	case <-l.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader's handler context was not cancelled")
	}
	require.Equal(t, connect.CodeCanceled, connect.CodeOf(<-errc))
}

func TestLeaderDownIsUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	f := forward.New(forward.Config{Self: "n2"})
	defer f.Close()
	addr := serve(t, &follower{f: f, addr: dead})
	client := ticketv1connect.NewLockServiceClient(http.DefaultClient, "http://"+addr)
	_, err = client.Acquire(context.Background(), &ticketv1.AcquireRequest{Key: "k"})
	require.Equal(t, connect.CodeUnavailable, connect.CodeOf(err))
}

func TestSanitizePassesPlainErrors(t *testing.T) {
	plain := errors.New("x")
	assert.Same(t, plain, forward.Sanitize(plain))
}
