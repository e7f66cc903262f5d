package httpapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/ticketd/ticketd/server/forward"
	"github.com/ticketd/ticketd/server/security"
)

// auditedCall serves one Connect unary call of an empty message through
// withCaller, from remoteAddr over the connection state cs (nil:
// plaintext) with the forwarding header forwardedBy, and returns what
// AuditCaller and security.ConnStateFrom said inside the handler.
func auditedCall(t *testing.T, remoteAddr string, cs *tls.ConnectionState, forwardedBy string) (string, *tls.ConnectionState) {
	t.Helper()
	var caller string
	var state *tls.ConnectionState
	const procedure = "/test.v1.AuditService/Call"
	h := withCaller(connect.NewUnaryHandler(procedure,
		func(ctx context.Context, _ *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
			caller, state = AuditCaller(ctx).String, security.ConnStateFrom(ctx)
			return connect.NewResponse(&emptypb.Empty{}), nil
		}))
	r := httptest.NewRequest(http.MethodPost, procedure, strings.NewReader(""))
	r.Header.Set("Content-Type", "application/proto")
	r.RemoteAddr, r.TLS = remoteAddr, cs
	if forwardedBy != "" {
		r.Header.Set(forward.Header, forwardedBy)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	return caller, state
}

// TestAuditCaller checks the audit log's caller description of a call:
// over plaintext its remote address and a forwarding header it cannot
// vouch for (no node certificate) as a claim; over TLS the verified client
// certificate's CN too, with the connection's state recorded for the auth
// interceptor.
func TestAuditCaller(t *testing.T) {
	leaf := &x509.Certificate{Subject: pkix.Name{CommonName: "alice"}}
	verified := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}}}
	tests := []struct {
		name, forwardedBy, want string
		cs                      *tls.ConnectionState
	}{
		{name: "direct", want: "192.0.2.1:1234"},
		{name: "unverified_forwarding_claim", forwardedBy: "n2", want: "192.0.2.1:1234 claims-forwarded-by=n2"},
		{name: "tls_client_certificate", cs: verified, want: "cn=alice 192.0.2.1:1234"},
		{name: "tls_forwarding_claim_without_node_certificate", cs: verified, forwardedBy: "n2",
			want: "cn=alice 192.0.2.1:1234 claims-forwarded-by=n2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			caller, state := auditedCall(t, "192.0.2.1:1234", tc.cs, tc.forwardedBy)
			assert.Equal(t, tc.want, caller)
			assert.Same(t, tc.cs, state)
		})
	}
	assert.Equal(t, "unknown", AuditCaller(context.Background()).String)
}

// TestPlaintextCallerAllocatesNothing checks that withCaller gives a
// plaintext request no context of its own: it is on every call's path,
// and a context value plus net/http's copy of the request
// (Request.WithContext) were two allocations per call.
func TestPlaintextCallerAllocatesNothing(t *testing.T) {
	h := withCaller(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := httptest.NewRequest(http.MethodPost, "/ticket.v1.LockService/Release", nil)
	w := httptest.NewRecorder()
	assert.Zero(t, testing.AllocsPerRun(100, func() { h.ServeHTTP(w, r) }))
}
