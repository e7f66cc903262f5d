package forward_test

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/forward"
	"github.com/ticketd/ticketd/server/security"
)

// headerLeader records the identity headers of the requests it receives.
type headerLeader struct {
	ticketv1connect.UnimplementedLockServiceHandler
	seen chan http.Header
}

func (l *headerLeader) Acquire(ctx context.Context, req *ticketv1.AcquireRequest) (*ticketv1.AcquireResponse, error) {
	ci, _ := connect.CallInfoForHandlerContext(ctx)
	l.seen <- ci.RequestHeader().Clone()
	return &ticketv1.AcquireResponse{Token: 1}, nil
}

// Watch records the headers of a relayed stream and sends one event.
func (l *headerLeader) Watch(ctx context.Context, req *ticketv1.WatchRequest, stream *connect.ServerStream[ticketv1.WatchEvent]) error {
	ci, _ := connect.CallInfoForHandlerContext(ctx)
	l.seen <- ci.RequestHeader().Clone()
	return stream.Send(&ticketv1.WatchEvent{Key: req.GetPrefix(), Index: 1})
}

// principalFollower forwards Acquire as the principal it is given (what
// the auth interceptor would have put in the context).
type principalFollower struct {
	ticketv1connect.UnimplementedLockServiceHandler
	f    *forward.Forwarder
	addr string
	p    *security.Principal
}

func (s *principalFollower) Acquire(ctx context.Context, req *ticketv1.AcquireRequest) (*ticketv1.AcquireResponse, error) {
	if s.p != nil {
		ctx = security.WithPrincipal(ctx, *s.p)
	}
	return forward.Call(ctx, s.f, "n1", s.f.Lock(s.addr).Acquire, req)
}

// Watch relays the stream to the leader through the Forwarder's client, as
// the server relays ClusterService.Snapshot.
func (s *principalFollower) Watch(ctx context.Context, req *ticketv1.WatchRequest, stream *connect.ServerStream[ticketv1.WatchEvent]) error {
	if s.p != nil {
		ctx = security.WithPrincipal(ctx, *s.p)
	}
	out, ci := connect.NewClientContext(ctx)
	ci.RequestHeader().Set(forward.Header, "n2")
	in, err := s.f.Lock(s.addr).Watch(out, req)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	for in.Receive() {
		if err := stream.Send(in.Msg()); err != nil {
			return err
		}
	}
	return in.Err()
}

// principalCase is one caller identity and the headers the leader must see.
type principalCase struct {
	name       string
	p          *security.Principal
	clientHdr  map[string]string
	wantAuth   string
	wantHeader string
}

// principalCases: the caller's bearer token is passed on unchanged, a
// certificate (or forwarded) principal goes in PrincipalHeader, and a
// PrincipalHeader the caller sent itself never is.
func principalCases() []principalCase {
	return []principalCase{
		{"token_passed_on", &security.Principal{Name: "bob", Source: security.SourceToken},
			map[string]string{"Authorization": "Bearer tok"}, "Bearer tok", ""},
		{"certificate_asserted", &security.Principal{Name: "alice", Source: security.SourceCertificate}, nil, "", "alice"},
		{"forwarded_again_asserted", &security.Principal{Name: "alice", Source: security.SourceForwarded}, nil, "", "alice"},
		{"no_principal_nothing", nil, map[string]string{security.PrincipalHeader: "root"}, "", ""},
		{"callers_own_header_not_copied", &security.Principal{Name: "bob", Source: security.SourceToken},
			map[string]string{"Authorization": "Bearer tok", security.PrincipalHeader: "root"}, "Bearer tok", ""},
	}
}

// principalSetup starts a leader that records headers and a follower that
// forwards to it as tc's principal; it returns a client of the follower and
// a context carrying tc's client headers.
func principalSetup(t *testing.T, tc principalCase) (ticketv1connect.LockServiceClient, *headerLeader, context.Context) {
	l := &headerLeader{seen: make(chan http.Header, 1)}
	laddr := serve(t, l)
	f := forward.New(forward.Config{Self: "n2"})
	t.Cleanup(f.Close)
	faddr := serve(t, &principalFollower{f: f, addr: laddr, p: tc.p})
	c := ticketv1connect.NewLockServiceClient(http.DefaultClient, "http://"+faddr)
	ctx, ci := connect.NewClientContext(context.Background())
	for k, v := range tc.clientHdr {
		ci.RequestHeader().Set(k, v)
	}
	return c, l, ctx
}

// TestForwardCarriesPrincipal: a forwarded unary request carries the
// caller's identity (principalCases).
func TestForwardCarriesPrincipal(t *testing.T) {
	for _, tc := range principalCases() {
		t.Run(tc.name, func(t *testing.T) {
			c, l, ctx := principalSetup(t, tc)
			_, err := c.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 1000})
			require.NoError(t, err)
			h := <-l.seen
			assert.Equal(t, tc.wantAuth, h.Get("Authorization"))
			assert.Equal(t, tc.wantHeader, h.Get(security.PrincipalHeader))
			assert.Equal(t, "n2", h.Get(forward.Header))
		})
	}
}

// TestForwardStreamCarriesPrincipal: a stream relayed through the
// Forwarder's client (as ClusterService.Snapshot is) carries the caller's
// identity exactly as a unary request does.
func TestForwardStreamCarriesPrincipal(t *testing.T) {
	for _, tc := range principalCases() {
		t.Run(tc.name, func(t *testing.T) {
			c, l, ctx := principalSetup(t, tc)
			stream, err := c.Watch(ctx, &ticketv1.WatchRequest{Prefix: "k"})
			require.NoError(t, err)
			defer func() { _ = stream.Close() }()
			require.True(t, stream.Receive(), "relayed event: %v", stream.Err())
			assert.Equal(t, "k", stream.Msg().GetKey())
			h := <-l.seen
			assert.Equal(t, tc.wantAuth, h.Get("Authorization"))
			assert.Equal(t, tc.wantHeader, h.Get(security.PrincipalHeader))
			assert.Equal(t, "n2", h.Get(forward.Header))
		})
	}
}
