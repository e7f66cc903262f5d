package server_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/internal/nodetest"
)

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
	t.Parallel()
	s := nodetest.StartStandalone(t, nil)
	assert.Contains(t, healthStatus(t, s.Addr), `"SERVING_STATUS_SERVING"`)
	require.NotNil(t, s.Backend.OnFatal, "the node gives the backend its fail-stop hook")

	boom := errors.New("apply index 7: undecodable entry")
	s.Backend.OnFatal(boom) // what a backend does when its Raft stops for good

	select {
	case err := <-s.Node.Fatal():
		require.ErrorIs(t, err, boom)
	case <-time.After(safety):
		t.Fatal("Fatal() did not deliver the backend's error")
	}
	assert.Contains(t, healthStatus(t, s.Addr), `"SERVING_STATUS_NOT_SERVING"`, "health turns NOT_SERVING at once")
	s.Backend.OnFatal(errors.New("second")) // never blocks
}
