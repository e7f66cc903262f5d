package e2e_test

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/server/forward"
)

// streamPolicy adds an admin by bearer token (ops) to authPolicy.
const streamPolicy = authPolicy + `
  - principal: ops
    allow: [admin]
`

// streamIdentity sets id's token and headers on every request, unary or
// streaming (headerInterceptor covers unary calls only).
type streamIdentity struct{ id identity }

func (s streamIdentity) set(h interface{ Set(string, string) }) {
	if s.id.token != "" {
		h.Set("Authorization", "Bearer "+s.id.token)
	}
	for k, v := range s.id.headers {
		h.Set(k, v)
	}
}

// WrapUnary sets the identity on a unary request.
func (s streamIdentity) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		s.set(req.Header())
		return next(ctx, req)
	}
}

// WrapStreamingClient sets the identity on a stream before it sends.
func (s streamIdentity) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		s.set(conn.RequestHeader())
		return conn
	}
}

// WrapStreamingHandler leaves handlers alone.
func (s streamIdentity) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// streamClientsOf returns clients of node i authenticating as id on streams too.
func streamClientsOf(t *testing.T, c *ticketdtest.Cluster, certsDir string, i int, id identity) (ticketv1connect.LockServiceClient, ticketv1connect.ClusterServiceClient) {
	t.Helper()
	cfg, err := (&ticketdtest.TLS{CertsDir: certsDir}).ClientConfig()
	require.NoError(t, err)
	if id.cert != "" {
		base := filepath.Join(certsDir, "client."+id.cert)
		kp, err := tls.LoadX509KeyPair(base+".crt", base+".key")
		require.NoError(t, err)
		cfg.Certificates = []tls.Certificate{kp}
	}
	hc := ticketdtest.TLSClient(cfg)
	t.Cleanup(hc.CloseIdleConnections)
	opt := connect.WithInterceptors(streamIdentity{id})
	return ticketv1connect.NewLockServiceClient(hc, c.URL(i), opt), ticketv1connect.NewClusterServiceClient(hc, c.URL(i), opt)
}

// snapshotVia reads a whole ClusterService.Snapshot stream: its header
// chunk, the leader the follower named, and the stream's error.
func snapshotVia(ctx context.Context, cl ticketv1connect.ClusterServiceClient) (*ticketv1.SnapshotHeader, string, error) {
	stream, err := cl.Snapshot(ctx, &ticketv1.SnapshotRequest{})
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = stream.Close() }()
	var h *ticketv1.SnapshotHeader
	for stream.Receive() {
		if h == nil {
			h = stream.Msg().GetHeader()
		}
	}
	return h, stream.ResponseHeader().Get(forward.LeaderHeader), stream.Err()
}

// TestForwardedStreamsKeepPrincipal runs a secure cluster (client TLS, peer
// mutual TLS, policy and tokens) and reads a snapshot through a follower,
// which relays the leader's stream: an admin by token and an admin by
// certificate get it (the leader sees them, not the follower's node
// identity, which the policy does not name); a non-admin and an anonymous
// caller are refused. A Watch on a follower (served there; its
// linearizable start forwards a ListLocks) sees a token caller's grant.
func TestForwardedStreamsKeepPrincipal(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		dir := makeCerts(t, 3, "e2e", "alice")
		_, authArgs := writeAuthFiles(t, dir, streamPolicy)
		c := ticketdtest.Start(t, ticketdtest.Options{
			Backend: backend,
			Args:    append([]string{"--lease-min-ms=10", "--lease-max-ms=120000"}, authArgs...),
			TLS:     &ticketdtest.TLS{CertsDir: dir, Peer: true, Client: "e2e"},
		})
		settle(t, c)
		ctx := ctxT(t)
		leader := c.Leader(t)
		f := (leader + 1) % c.Len()
		leaderID := c.Node(leader).ID

		tests := []struct {
			name string
			id   identity
			code connect.Code // 0: served
		}{
			{"admin_token", identity{token: opsToken}, 0},
			{"admin_certificate", identity{cert: "e2e"}, 0},
			{"lock_token_refused", identity{token: bobToken}, connect.CodePermissionDenied},
			{"anonymous_refused", identity{}, connect.CodeUnauthenticated},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, cl := streamClientsOf(t, c, dir, f, tc.id)
				h, named, err := snapshotVia(ctx, cl)
				if tc.code != 0 {
					requireCode(t, tc.code, err)
					return
				}
				require.NoError(t, err)
				require.NotNil(t, h, "the first chunk carries the header")
				assert.Equal(t, leaderID, h.GetNodeId(), "the leader wrote the snapshot")
				assert.Equal(t, leaderID, named, "the follower names the leader it relayed")
			})
		}

		t.Run("watch_on_follower_token", func(t *testing.T) {
			lock, _ := streamClientsOf(t, c, dir, f, identity{token: bobToken})
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			stream, err := lock.Watch(wctx, &ticketv1.WatchRequest{Prefix: "shared/"})
			require.NoError(t, err)
			defer func() { _ = stream.Close() }()
			receiveStarted(t, stream)
			res, err := lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/w", LeaseMs: 60000, Owner: "bob-w"})
			require.NoError(t, err)
			require.True(t, stream.Receive(), "watch event: %v", stream.Err())
			assert.Equal(t, "shared/w", stream.Msg().GetKey())
			assert.Equal(t, res.GetToken(), stream.Msg().GetToken())
		})
	})
}
