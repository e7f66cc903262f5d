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

// TestForwardCarriesPrincipal: a forwarded request carries the caller's
// bearer token unchanged, or a certificate principal in PrincipalHeader,
// and never a PrincipalHeader the caller sent itself.
func TestForwardCarriesPrincipal(t *testing.T) {
	tests := []struct {
		name       string
		p          *security.Principal
		clientHdr  map[string]string
		wantAuth   string
		wantHeader string
	}{
		{"token_passed_on", &security.Principal{Name: "bob", Source: security.SourceToken},
			map[string]string{"Authorization": "Bearer tok"}, "Bearer tok", ""},
		{"certificate_asserted", &security.Principal{Name: "alice", Source: security.SourceCertificate}, nil, "", "alice"},
		{"forwarded_again_asserted", &security.Principal{Name: "alice", Source: security.SourceForwarded}, nil, "", "alice"},
		{"no_principal_nothing", nil, map[string]string{security.PrincipalHeader: "root"}, "", ""},
		{"callers_own_header_not_copied", &security.Principal{Name: "bob", Source: security.SourceToken},
			map[string]string{"Authorization": "Bearer tok", security.PrincipalHeader: "root"}, "Bearer tok", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
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
			_, err := c.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 1000})
			require.NoError(t, err)
			h := <-l.seen
			assert.Equal(t, tc.wantAuth, h.Get("Authorization"))
			assert.Equal(t, tc.wantHeader, h.Get(security.PrincipalHeader))
			assert.Equal(t, "n2", h.Get(forward.Header))
		})
	}
}
