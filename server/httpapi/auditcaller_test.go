package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/forward"
	"github.com/ticketd/ticketd/server/security"
)

// TestAuditCaller checks the audit log's caller description
// that withCaller records for a plaintext request: its remote address, and a
// forwarding header it cannot vouch for (no node certificate) as a claim.
func TestAuditCaller(t *testing.T) {
	tests := []struct {
		name, forwardedBy, want string
	}{
		{name: "direct", want: "192.0.2.1:1234"},
		{name: "unverified_forwarding_claim", forwardedBy: "n2", want: "192.0.2.1:1234 claims-forwarded-by=n2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ctx context.Context
			h := withCaller(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { ctx = r.Context() }))
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			r.RemoteAddr = "192.0.2.1:1234"
			if tc.forwardedBy != "" {
				r.Header.Set(forward.Header, tc.forwardedBy)
			}
			h.ServeHTTP(httptest.NewRecorder(), r)
			require.NotNil(t, ctx)
			assert.Equal(t, tc.want, AuditCaller(ctx).String)
			assert.Nil(t, security.ConnStateFrom(ctx))
		})
	}
	assert.Equal(t, "unknown", AuditCaller(context.Background()).String)
}
