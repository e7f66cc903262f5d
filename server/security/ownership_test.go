package security_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/security"
)

// TestMayActFor: a principal acts on what it holds; an admin on what anyone
// holds only where admins count; with authorization off everyone may.
func TestMayActFor(t *testing.T) {
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(policyFile, []byte("rules:\n  - principal: root\n    allow: [admin]\n"), 0o600))
	a, err := security.NewAuthenticator(security.AuthConfig{PolicyFile: policyFile})
	require.NoError(t, err)
	as := func(name string) context.Context {
		return security.WithPrincipal(context.Background(), security.Principal{Name: name, Source: security.SourceToken})
	}
	for _, tc := range []struct {
		caller, owner string
		admins, want  bool
	}{
		{"alice", "alice", false, true},
		{"alice", "alice", true, true},
		{"bob", "alice", false, false},
		{"bob", "alice", true, false},
		{"root", "alice", false, false},
		{"root", "alice", true, true},
		{"", "alice", true, false},
	} {
		assert.Equal(t, tc.want, a.MayActFor(as(tc.caller), tc.owner, tc.admins), "%q on %q's, admins %t", tc.caller, tc.owner, tc.admins)
	}

	off, err := security.NewAuthenticator(security.AuthConfig{})
	require.NoError(t, err)
	assert.True(t, off.MayActFor(as("bob"), "alice", false), "authorization off: anyone")
	var none *security.Authenticator
	assert.True(t, none.MayActFor(context.Background(), "alice", false), "no authenticator: authorization off")
}
