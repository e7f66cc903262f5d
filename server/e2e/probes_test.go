package e2e_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// probe GETs path on node i over plain HTTP/1.1 and returns the status code
// and body (code 0 when the node does not answer).
func probe(c *ticketdtest.Cluster, i int, path string) (int, string) {
	res, err := http.Get("http://" + c.Node(i).APIAddr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestProbes: /livez and /readyz answer 200 on every node of a healthy
// cluster; when quorum is lost the last node stays live but turns not ready
// (no leader), and it turns ready again when quorum is back.
func TestProbes(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		c := start(t, backend)
		for i := range c.Len() {
			code, body := probe(c, i, "/livez")
			require.Equal(t, http.StatusOK, code, body)
			require.Equal(t, "ok\n", body)
			code, body = probe(c, i, "/readyz")
			require.Equal(t, http.StatusOK, code, body)
			code, body = probe(c, i, "/readyz?verbose")
			require.Equal(t, http.StatusOK, code, body)
			for _, check := range []string{"raft", "shutdown", "leader", "replay", "apply_lag"} {
				require.Contains(t, body, "[+]"+check+" ok")
			}
		}
		c.Kill(1)
		c.Kill(2)
		var body string
		eventually(t, func() bool {
			var code int
			code, body = probe(c, 0, "/readyz")
			return code == http.StatusServiceUnavailable
		}, "the node left alone turns not ready")
		require.True(t, strings.HasPrefix(body, "not ready: leader: no leader known"), body)
		code, _ := probe(c, 0, "/livez")
		require.Equal(t, http.StatusOK, code)

		c.Restart(1)
		eventually(t, func() bool {
			code0, _ := probe(c, 0, "/readyz")
			code1, _ := probe(c, 1, "/readyz")
			return code0 == http.StatusOK && code1 == http.StatusOK
		}, "quorum back: ready again")
	})
}
