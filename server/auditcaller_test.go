package server_test

import (
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
