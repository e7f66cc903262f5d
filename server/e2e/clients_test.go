package e2e_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// TestCurlConnectJSON acquires and releases a lock with plain curl speaking
// the Connect protocol with JSON bodies (64-bit fields are JSON strings).
func TestCurlConnectJSON(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed on this machine; the Connect JSON path is also covered by TestBadInput")
	}
	matrix(t, func(t *testing.T, backend string) {
		c := start(t, backend)
		for _, i := range []int{c.Leader(t), follower(t, c)} {
			addr := c.Node(i).APIAddr
			post := func(procedure, body string) map[string]any {
				out, err := exec.Command(curl, "-sS", "--fail-with-body", "-X", "POST",
					"-H", "Content-Type: application/json", "-d", body,
					"http://"+addr+procedure).CombinedOutput()
				require.NoError(t, err, "curl %s: %s", procedure, out)
				var m map[string]any
				require.NoError(t, json.Unmarshal(out, &m), "%s", out)
				return m
			}
			key := "curl/" + c.Node(i).ID
			got := post("/ticket.v1.LockService/Acquire", `{"key":"`+key+`","leaseMs":"5000"}`)
			token, ok := got["token"].(string)
			require.True(t, ok, "token is a JSON string: %v", got)
			assert.Equal(t, "5000", got["leaseMs"])
			post("/ticket.v1.LockService/Release", `{"key":"`+key+`","token":"`+token+`"}`)
			got = post("/ticket.v1.LockService/GetLock", `{"key":"`+key+`"}`)
			assert.Nil(t, got["held"], "released: %v", got)
		}
	})
}

// TestBufCurlReflection acquires and releases a lock with `buf curl` over
// gRPC, learning the schema through the server's reflection service.
func TestBufCurlReflection(t *testing.T) {
	root := repoRoot(t)
	if out, err := exec.Command("go", "-C", root, "tool", "buf", "--version").CombinedOutput(); err != nil {
		t.Skipf("buf is not available as `go tool buf` from %s: %v %s", root, err, out)
	}
	matrix(t, func(t *testing.T, backend string) {
		c := start(t, backend)
		addr := c.Node(follower(t, c)).APIAddr // forwarded to the leader
		bufCurl := func(procedure, body string) map[string]any {
			cmd := exec.Command("go", "tool", "buf", "curl", "--protocol", "grpc", "--http2-prior-knowledge",
				"--reflect", "--data", body, "http://"+addr+procedure)
			cmd.Dir = root
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			require.NoError(t, err, "buf curl %s: %s", procedure, stderr.String())
			var m map[string]any
			require.NoError(t, json.Unmarshal(out, &m), "%s", out)
			return m
		}
		got := bufCurl("/ticket.v1.LockService/Acquire", `{"key":"buf/k","lease_ms":5000}`)
		token, ok := got["token"].(string)
		require.True(t, ok, "token: %v", got)
		bufCurl("/ticket.v1.LockService/Release", `{"key":"buf/k","token":"`+token+`"}`)
		health := bufCurl("/grpc.health.v1.Health/Check", `{"service":"ticket.v1.LockService"}`)
		assert.Equal(t, "SERVING", health["status"])
		st := status(t, c, c.Leader(t))
		assert.Equal(t, int64(0), st.LocksHeld)
	})
}

// repoRoot is the directory of the go.work file (where `go tool buf` resolves).
func repoRoot(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOWORK").Output()
	work := strings.TrimSpace(string(out))
	if err != nil || work == "" || work == "off" {
		t.Skip("not inside the ticketd go.work workspace: cannot run `go tool buf`")
	}
	return filepath.Dir(work)
}

var _ = ticketdtest.BinEnv
