package sdk_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
)

// hintingNode answers every Acquire with Unavailable and a LeaderHint naming
// hint, and Status with leader_addr = hint and itself as the only member: a
// compromised or misconfigured member trying to send clients elsewhere.
type hintingNode struct {
	ticketv1connect.UnimplementedLockServiceHandler
	ticketv1connect.UnimplementedClusterServiceHandler
	self, hint string
}

func (h *hintingNode) Acquire(context.Context, *ticketv1.AcquireRequest) (*ticketv1.AcquireResponse, error) {
	err := connect.NewError(connect.CodeUnavailable, errors.New("not leader"))
	d, _ := connect.NewErrorDetail(&ticketv1.LeaderHint{LeaderId: "evil", LeaderAddr: h.hint})
	err.AddDetail(d)
	return nil, err
}

func (h *hintingNode) Status(context.Context, *ticketv1.StatusRequest) (*ticketv1.StatusResponse, error) {
	return &ticketv1.StatusResponse{NodeId: "a", LeaderId: "evil", LeaderAddr: h.hint,
		Members: []*ticketv1.Member{{Id: "a", ApiAddr: h.self, Voter: true}}}, nil
}

// countingServer counts every request it receives.
func countingServer(t *testing.T, tlsOn bool) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	srv.EnableHTTP2 = true
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	if tlsOn {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestLeaderHintToUnknownAddressNotFollowed(t *testing.T) {
	evil, hits := countingServer(t, false)
	node := &hintingNode{hint: evil.Listener.Addr().String()}
	mux := http.NewServeMux()
	mux.Handle(ticketv1connect.NewLockServiceHandler(node))
	mux.Handle(ticketv1connect.NewClusterServiceHandler(node))
	srv := sdk.NewH2CServer(mux)
	t.Cleanup(srv.Close)
	node.self = srv.Listener.Addr().String()

	c := newClient(t, []string{node.self}, sdk.WithBackoff(5*time.Millisecond, 20*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := c.Acquire(ctx, "k", time.Second)
	require.Error(t, err)
	assert.Zero(t, hits.Load(), "the client contacted an address no configured endpoint lists as a member")
	assert.Empty(t, c.Leader())
}

func TestHTTPSEndpointsStayHTTPS(t *testing.T) {
	_, err := sdk.New([]string{"https://127.0.0.1:1", "http://127.0.0.1:2"})
	require.ErrorIs(t, err, sdk.ErrInvalidArgument, "mixed schemes are refused")

	c := newClient(t, []string{"127.0.0.1:1"}, sdk.WithTLS(&tls.Config{}))
	assert.Equal(t, []string{"https://127.0.0.1:1"}, c.Endpoints(), "host:port means https with WithTLS")
}
