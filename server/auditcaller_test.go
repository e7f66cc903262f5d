package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/forward"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// TestAuditCallerOverH2C: an audited call (a forced Release) over a
// plaintext HTTP/2 connection names its caller, the client's address, in
// the audit line, though the API gives plaintext requests no caller
// context of their own (connect's call information carries it).
func TestAuditCallerOverH2C(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	in, _ := memNodeWith(t, []server.Option{server.WithLogger(zap.New(core))})
	lock := ticketv1connect.NewLockServiceClient(nodetest.H2CClient(), "http://"+in.Addr)
	_, err := lock.Acquire(ctxT(t), &ticketv1.AcquireRequest{Key: "audit/caller", LeaseMs: 30_000})
	require.NoError(t, err)
	_, err = lock.Release(ctxT(t), &ticketv1.ReleaseRequest{Key: "audit/caller", Force: true})
	require.NoError(t, err)
	lines := logs.FilterMessage("force-release requested").All()
	require.Len(t, lines, 1)
	caller, _ := lines[0].ContextMap()["caller"].(string)
	assert.True(t, strings.HasPrefix(caller, "127.0.0.1:"), "caller %q: the client's address", caller)
}

// TestAuditCallerSpoofedForwardHeader: a plaintext client that sends the
// forwarding header itself, over HTTP/2 or HTTP/1.1, is logged with its
// own address and the header as a claim only ("claims-forwarded-by="),
// never as a node that forwarded the call: nothing vouches for the header
// on a plaintext connection (httpapi/auditcaller.go).
func TestAuditCallerSpoofedForwardHeader(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	in, _ := memNodeWith(t, []server.Option{server.WithLogger(zap.New(core))})
	for name, tr := range map[string]http.RoundTripper{"h2c": nodetest.H2CClient().Transport, "http1": &http.Transport{}} {
		hc := &http.Client{Transport: spoofForward{tr}}
		lock := ticketv1connect.NewLockServiceClient(hc, "http://"+in.Addr)
		key := "audit/spoof/" + name
		_, err := lock.Acquire(ctxT(t), &ticketv1.AcquireRequest{Key: key, LeaseMs: 30_000})
		require.NoError(t, err)
		_, err = lock.Release(ctxT(t), &ticketv1.ReleaseRequest{Key: key, Force: true})
		require.NoError(t, err, name)
	}
	lines := logs.FilterMessage("force-release requested").All()
	require.Len(t, lines, 2)
	for _, l := range lines {
		caller, _ := l.ContextMap()["caller"].(string)
		assert.Regexp(t, `^127\.0\.0\.1:[0-9]+ claims-forwarded-by=node-1$`, caller, "a plaintext forwarding header is a claim")
	}
}

// spoofForward sends every request with the forwarding header naming a
// node, as a client pretending to be one would.
type spoofForward struct{ http.RoundTripper }

func (s spoofForward) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(forward.Header, "node-1")
	return s.RoundTripper.RoundTrip(r)
}
