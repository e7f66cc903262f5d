package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/server/security"
)

// TestAuthExitCodes runs ticketctl against a real node with TLS and
// authorization on: --token and TICKETD_TOKEN authenticate, a refused
// request exits 7 (unauthenticated) or 6 (permission denied), and an admin
// force-releases with `lock release KEY --force`.
func TestAuthExitCodes(t *testing.T) {
	dir := t.TempDir()
	_, err := security.CreateCA(dir, time.Hour, false)
	require.NoError(t, err)
	_, err = security.CreateNode(dir, "n1", []string{"127.0.0.1"}, time.Hour, false)
	require.NoError(t, err)
	for _, name := range []string{"admin", "alice"} {
		_, err = security.CreateClient(dir, name, time.Hour, false)
		require.NoError(t, err)
	}
	policy := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte(`rules:
  - principal: admin
    allow: [admin]
  - principal: "*"
    prefix: "shared/"
    allow: [lock]
`), 0o600))
	tokens := filepath.Join(dir, "tokens.yaml")
	require.NoError(t, os.WriteFile(tokens, []byte("tokens:\n  - principal: bob\n    sha256: "+security.TokenDigest("bob-secret")+"\n"), 0o600))
	cl := ticketdtest.Start(t, ticketdtest.Options{
		Nodes: 1,
		Args:  []string{"--auth-policy-file", policy, "--auth-tokens-file", tokens},
		TLS:   &ticketdtest.TLS{CertsDir: dir, Client: "admin"},
	})
	cl.WaitLeader(t, 30*time.Second)
	ep := cl.Node(0).APIAddr
	ca := "--cacert=" + filepath.Join(dir, "ca.crt")
	as := func(name string) []string {
		cert, key := security.ClientFiles(name)
		return []string{ca, "--cert", filepath.Join(dir, cert), "--key", filepath.Join(dir, key)}
	}

	code, _, errs := ctl(t, ep, ca, "status")
	assert.Equal(t, exitUnauthenticated, code, "no credential: %s", errs)
	code, _, errs = ctl(t, ep, ca, "--token", "bob-wrong", "status")
	assert.Equal(t, exitUnauthenticated, code, "wrong token: %s", errs)

	t.Setenv("TICKETD_TOKEN", "bob-secret")
	var got struct {
		Token uint64 `json:"token,string"`
	}
	ctlJSON(t, ep, exitOK, &got, ca, "lock", "acquire", "shared/x", "--ttl", "60s")
	require.NotZero(t, got.Token)
	t.Setenv("TICKETD_TOKEN", "")

	code, _, errs = ctl(t, ep, append(as("alice"), "lock", "release", "shared/x", itoa(got.Token))...)
	assert.Equal(t, exitDenied, code, "another principal's lock: %s", errs)
	code, _, errs = ctl(t, ep, append(as("alice"), "lock", "release", "shared/x", "--force")...)
	assert.Equal(t, exitDenied, code, "force needs admin: %s", errs)
	code, out, errs := ctl(t, ep, append(as("admin"), "lock", "release", "shared/x", "--force")...)
	require.Equal(t, exitOK, code, "admin force-release: %s", errs)
	assert.Contains(t, out, "force-released")
	code, _, _ = ctl(t, ep, append(as("admin"), "lock", "release", "shared/x", "--force")...)
	assert.Equal(t, exitNotHeld, code, "nothing left to force-release")
}

func TestAuthHashToken(t *testing.T) {
	code, out, errs := ctl(t, "127.0.0.1:1", "auth", "hash-token", "--principal", "orders-svc", "tok")
	require.Equal(t, exitOK, code, errs)
	assert.True(t, strings.Contains(out, "principal: orders-svc") && strings.Contains(out, security.TokenDigest("tok")), out)
	_, err := security.ParseTokens([]byte("tokens:\n" + out))
	require.NoError(t, err, "the printed entry is a valid tokens file entry")
}
