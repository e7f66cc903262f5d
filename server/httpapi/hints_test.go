package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// TestHints: a request without Content-Type, with curl's form Content-Type,
// or to a procedure that does not exist gets its status code with a
// one-line hint in the body, and nothing changes; a proper JSON call still
// works.
func TestHints(t *testing.T) {
	c := nodetest.Start(t, 1)
	base := "http://" + c.Nodes[0].Addr
	tests := []struct {
		name, path, ctype string
		code              int
		hint              string
	}{
		{"no_content_type", "/ticket.v1.LockService/Acquire", "", http.StatusUnsupportedMediaType, "missing Content-Type"},
		{"form_content_type", "/ticket.v1.LockService/Acquire", "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType, "application/json"},
		{"unknown_method", "/ticket.v1.LockService/Lock", "application/json", http.StatusNotFound, "ticket.v1.LockService has Acquire, Release"},
		{"unknown_service", "/ticket.v1.Locks/Acquire", "application/json", http.StatusNotFound, "no service ticket.v1.Locks"},
		{"json_works", "/ticket.v1.ClusterService/Status", "application/json", http.StatusOK, `"nodeId"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, base+tc.path, strings.NewReader(`{"key":"k","leaseMs":"1000"}`))
			require.NoError(t, err)
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			if tc.name == "json_works" {
				req.Body = io.NopCloser(strings.NewReader(`{}`))
			}
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			assert.Equal(t, tc.code, res.StatusCode, "%s", body)
			assert.Contains(t, string(body), tc.hint)
		})
	}
	assert.Equal(t, 0.0, nodetest.Metric(t, c.Nodes[0].Addr, "ticketd_locks_held"), "no hinted request changed anything")
}
