package security_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/security"
)

// authServer serves, over real TLS on loopback, the principal that a
// authenticates for each request (or "refused: <error>").
func authServer(t *testing.T, p pki, a *security.Authenticator) string {
	t.Helper()
	r, err := security.NewReloader(p.files(false), nil)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx := security.WithConnState(req.Context(), req.TLS)
		pr, err := a.Authenticate(ctx, req.Header)
		switch {
		case errors.Is(err, security.ErrForwardedPrincipal) && errors.Is(err, security.ErrRevoked):
			_, _ = io.WriteString(w, "refused: forwarded, revoked")
		case errors.Is(err, security.ErrForwardedPrincipal):
			_, _ = io.WriteString(w, "refused: forwarded")
		case errors.Is(err, security.ErrUnauthenticated):
			_, _ = io.WriteString(w, "refused: unauthenticated")
		case err != nil:
			_, _ = io.WriteString(w, "error: "+err.Error())
		default:
			_, _ = io.WriteString(w, pr.Source+":"+pr.Name)
		}
	}))
	srv.TLS = security.ServerConfig(r, false)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestAuthenticate(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	tokensFile := filepath.Join(dir, "tokens.yaml")
	require.NoError(t, os.WriteFile(tokensFile, []byte(tokensYAML("orders-svc", "tok-orders")), 0o600))
	policyFile := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(policyFile, []byte(examplePolicy), 0o600))
	// An earlier certificate of member n1, revoked in the peer list only
	// (the API's handshake, below, checks no list).
	stolen := p.issueNode(t, "n1")
	revoke(t, p, stolen)
	peer, err := security.NewReloader(p.crlFiles(false), nil)
	require.NoError(t, err)
	isMember := func(id string) bool { return id == "n1" }
	a, err := security.NewAuthenticator(security.AuthConfig{
		PolicyFile: policyFile, TokensFile: tokensFile,
		Member: func(cs *tls.ConnectionState) error { return security.VerifyMember(cs, isMember, peer) },
	})
	require.NoError(t, err)
	require.True(t, a.Enabled())
	url := authServer(t, p, a)

	client, err := p.ca.Issue(security.CertOptions{CommonName: "billing", Client: true})
	require.NoError(t, err)
	stranger, err := p.ca.Issue(security.CertOptions{CommonName: "n9", Server: true, Client: true})
	require.NoError(t, err)
	huge, err := p.ca.Issue(security.CertOptions{CommonName: strings.Repeat("x", 300), Client: true})
	require.NoError(t, err)

	tests := []struct {
		name    string
		cert    *security.KeyPair
		headers map[string]string
		want    string
	}{
		{"certificate_cn", client, nil, "certificate:billing"},
		{"bearer_token", nil, map[string]string{"Authorization": "Bearer tok-orders"}, "token:orders-svc"},
		{"token_wins_over_certificate", client, map[string]string{"Authorization": "Bearer tok-orders"}, "token:orders-svc"},
		{"wrong_token", nil, map[string]string{"Authorization": "Bearer tok-wrong"}, "refused: unauthenticated"},
		{"wrong_token_with_certificate", client, map[string]string{"Authorization": "Bearer nope"}, "refused: unauthenticated"},
		{"basic_auth_is_not_a_token", nil, map[string]string{"Authorization": "Basic b3JkZXJzOng="}, "refused: unauthenticated"},
		{"nothing", nil, nil, "refused: unauthenticated"},
		{"member_node_forwards", p.node, map[string]string{security.PrincipalHeader: "orders-svc"}, "forwarded:orders-svc"},
		{"client_cert_asserts_principal", client, map[string]string{security.PrincipalHeader: "ops"}, "refused: forwarded"},
		{"token_client_asserts_principal", nil, map[string]string{"Authorization": "Bearer tok-orders", security.PrincipalHeader: "ops"}, "refused: forwarded"},
		{"non_member_node_asserts_principal", stranger, map[string]string{security.PrincipalHeader: "ops"}, "refused: forwarded"},
		{"peer_revoked_member_node_asserts_principal", stolen, map[string]string{security.PrincipalHeader: "ops"}, "refused: forwarded, revoked"},
		{"node_cert_without_header", p.node, nil, "certificate:n1"},
		{"oversized_cn_refused", huge, nil, "refused: unauthenticated"},
		{"forwarded_principal_with_control_character", p.node, map[string]string{security.PrincipalHeader: "a\tb"}, "refused: unauthenticated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &tls.Config{RootCAs: p.pool(), MinVersion: tls.VersionTLS12}
			if tc.cert != nil {
				cfg.Certificates = []tls.Certificate{tc.cert.TLS()}
			}
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
			defer hc.CloseIdleConnections()
			req, err := http.NewRequest(http.MethodGet, url, nil)
			require.NoError(t, err)
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			res, err := hc.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			assert.Equal(t, tc.want, string(body))
		})
	}
}

func TestAuthenticatorReloadKeepsOldOnError(t *testing.T) {
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(policyFile, []byte("rules:\n  - principal: a\n    allow: [admin]\n"), 0o600))
	reloads := 0
	a, err := security.NewAuthenticator(security.AuthConfig{PolicyFile: policyFile, OnReload: func() { reloads++ }})
	require.NoError(t, err)
	require.True(t, a.Policy().IsAdmin("a"))

	require.NoError(t, os.WriteFile(policyFile, []byte("rules:\n  - principal: a\n    allow: [sudo]\n"), 0o600))
	require.ErrorIs(t, a.Reload("test"), security.ErrBadPolicy)
	assert.True(t, a.Policy().IsAdmin("a"), "a failed reload keeps the old policy")
	assert.Zero(t, reloads, "a failed reload ends no stream")

	require.NoError(t, os.WriteFile(policyFile, []byte("rules:\n  - principal: b\n    allow: [admin]\n"), 0o600))
	require.NoError(t, a.Reload("test"))
	assert.Equal(t, 1, reloads, "a successful reload tells the node, which ends open watches")
	assert.False(t, a.Policy().IsAdmin("a"))
	assert.True(t, a.Policy().IsAdmin("b"))

	_, err = security.NewAuthenticator(security.AuthConfig{PolicyFile: filepath.Join(dir, "missing.yaml")})
	require.Error(t, err, "a missing policy file stops the start")
}
