package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// TestTLSClientAPI: with cert_file and client_cert_auth, the API answers
// Connect, gRPC and gRPC-Web over HTTP/2 and HTTP/1.1 to a client with a
// certificate from the trusted CA, and refuses a client without one, one
// that does not trust the node, and plaintext h2c; refused clients change
// nothing.
func TestTLSClientAPI(t *testing.T) {
	p := nodetest.NewPKI(t)
	s := nodetest.StartStandalone(t, p.SecureConfig)
	url := "https://" + s.Addr
	ctx := ctxT(t)

	t.Run("sdk_with_client_cert", func(t *testing.T) {
		c, err := sdk.New([]string{s.Addr}, sdk.WithTLS(p.ClientTLS(true)))
		require.NoError(t, err)
		defer c.Close()
		l, err := c.TryLock(ctx, "tls/a", 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(ctx))
	})
	protocols := []struct {
		name  string
		http1 bool
		opts  []connect.ClientOption
	}{
		{"connect_http2", false, nil},
		{"connect_http1", true, nil},
		{"grpc_http2", false, []connect.ClientOption{connect.WithGRPC()}},
		{"grpcweb_http1", true, []connect.ClientOption{connect.WithGRPCWeb()}},
	}
	for _, pr := range protocols {
		t.Run(pr.name, func(t *testing.T) {
			lc := ticketv1connect.NewLockServiceClient(nodetest.TLSHTTPClient(p.ClientTLS(true), pr.http1), url, pr.opts...)
			res, err := lc.Acquire(ctx, &ticketv1.AcquireRequest{Key: "tls/" + pr.name, LeaseMs: 10_000, Owner: "o"})
			require.NoError(t, err)
			assert.NotZero(t, res.GetToken())
		})
	}

	refusals := []struct {
		name   string
		client *http.Client
		url    string
	}{
		{"no_client_cert", nodetest.TLSHTTPClient(p.ClientTLS(false), false), url},
		{"server_not_trusted", nodetest.TLSHTTPClient(nodetest.NewPKI(t).ClientTLS(false), false), url},
		{"plaintext_h2c_to_tls_port", nodetest.H2CClient(), "http://" + s.Addr},
	}
	for _, rf := range refusals {
		t.Run(rf.name, func(t *testing.T) {
			lc := ticketv1connect.NewLockServiceClient(rf.client, rf.url)
			_, err := lc.Acquire(ctx, &ticketv1.AcquireRequest{Key: "tls/refused", LeaseMs: 10_000, Owner: "o"})
			require.Error(t, err)
		})
	}
	t.Run("nothing_granted_to_refused_clients", func(t *testing.T) {
		lc := ticketv1connect.NewLockServiceClient(nodetest.TLSHTTPClient(p.ClientTLS(true), false), url)
		res, err := lc.GetLock(ctx, &ticketv1.GetLockRequest{Key: "tls/refused"})
		require.NoError(t, err)
		assert.False(t, res.GetHeld())
	})
}
