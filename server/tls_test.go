package server_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/memraft"
	"github.com/ticketd/ticketd/server/internal/nodetest"
	"github.com/ticketd/ticketd/server/security"
)

func TestTLSClientAPI(t *testing.T) {
	p := newTestPKI(t)
	s := startStandalone(t, p.secureConfig)
	url := "https://" + s.addr
	ctx := ctxT(t)

	t.Run("sdk_with_client_cert", func(t *testing.T) {
		c, err := sdk.New([]string{s.addr}, sdk.WithTLS(p.clientTLS(true)))
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
			lc := ticketv1connect.NewLockServiceClient(tlsHTTPClient(p.clientTLS(true), pr.http1), url, pr.opts...)
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
		{"no_client_cert", tlsHTTPClient(p.clientTLS(false), false), url},
		{"server_not_trusted", tlsHTTPClient(newTestPKI(t).clientTLS(false), false), url},
		{"plaintext_h2c_to_tls_port", nodetest.H2CClient(), "http://" + s.addr},
	}
	for _, rf := range refusals {
		t.Run(rf.name, func(t *testing.T) {
			lc := ticketv1connect.NewLockServiceClient(rf.client, rf.url)
			_, err := lc.Acquire(ctx, &ticketv1.AcquireRequest{Key: "tls/refused", LeaseMs: 10_000, Owner: "o"})
			require.Error(t, err)
		})
	}
	t.Run("nothing_granted_to_refused_clients", func(t *testing.T) {
		lc := ticketv1connect.NewLockServiceClient(tlsHTTPClient(p.clientTLS(true), false), url)
		res, err := lc.GetLock(ctx, &ticketv1.GetLockRequest{Key: "tls/refused"})
		require.NoError(t, err)
		assert.False(t, res.GetHeld())
	})
}

func TestInsecureExposureRefused(t *testing.T) {
	tests := []struct {
		name string
		edit func(c *config.Config)
		ok   bool
	}{
		{"public_api_plaintext", func(c *config.Config) { c.APIAddr = "192.0.2.10:7001" }, false},
		{"public_raft_plaintext", func(c *config.Config) { c.RaftAddr = "0.0.0.0:7101" }, false},
		{"public_api_insecure_flag", func(c *config.Config) { c.APIAddr = "192.0.2.10:7001"; c.Insecure = true }, true},
		{"loopback_plaintext", func(c *config.Config) {}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.DefaultConfig()
			cfg.DataDir = t.TempDir()
			tt.edit(&cfg)
			cfg.Bootstrap = nil
			n, err := server.New(cfg, server.WithBackend(func(bc backends.Config) (server.Backend, error) { return memraft.New(bc) }))
			if tt.ok {
				require.NoError(t, err)
				require.NoError(t, n.Close(ctxT(t)))
				return
			}
			require.ErrorIs(t, err, security.ErrInsecureExposure)
			assert.Contains(t, err.Error(), "--insecure")
		})
	}
}

// healthStatus asks the node's gRPC health service (Connect JSON) for the
// server-wide status.
func healthStatus(t *testing.T, addr string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/grpc.health.v1.Health/Check", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(b)
}

func TestFailStopOnFatalBackendError(t *testing.T) {
	s := startStandalone(t, nil)
	assert.Contains(t, healthStatus(t, s.addr), `"SERVING_STATUS_SERVING"`)
	require.NotNil(t, s.backend.OnFatal, "the node gives the backend its fail-stop hook")

	boom := errors.New("apply index 7: undecodable entry")
	s.backend.OnFatal(boom) // what a backend does when its Raft stops for good

	select {
	case err := <-s.node.Fatal():
		require.ErrorIs(t, err, boom)
	case <-time.After(safety):
		t.Fatal("Fatal() did not deliver the backend's error")
	}
	assert.Contains(t, healthStatus(t, s.addr), `"SERVING_STATUS_NOT_SERVING"`, "health turns NOT_SERVING at once")
	s.backend.OnFatal(errors.New("second")) // never blocks
}

func TestMetricsOnTheirOwnListener(t *testing.T) {
	s := startStandalone(t, func(c *config.Config) { c.ListenMetricsAddr = "127.0.0.1:0" })
	res, err := http.Get("http://" + s.addr + "/metrics")
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusNotFound, res.StatusCode, "/metrics left the API port")
	assert.NotNil(t, s.node.MetricsHandler())
}
