package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/memraft"
	"github.com/ticketd/ticketd/server/security"
)

// TestServeRefusesBadAuthFiles: a policy (its quotas included) or tokens
// file that does not parse strictly stops `ticketd serve` at start with an error naming the
// file (never a node running with no policy or half of one).
func TestServeRefusesBadAuthFiles(t *testing.T) {
	tests := []struct {
		name, policy, tokens string
		want                 error
	}{
		{"unknown_permission", "rules:\n  - principal: a\n    allow: [write]\n", "", security.ErrBadPolicy},
		{"unknown_field", "rules:\n  - principal: a\n    allow: [read]\n    prefixes: [x]\n", "", security.ErrBadPolicy},
		{"empty_principal", "rules:\n  - principal: \"\"\n    allow: [read]\n", "", security.ErrBadPolicy},
		{"unknown_quota_field", "rules: []\nquotas:\n  - {principal: a, lockz: 3}\n", "", security.ErrBadPolicy},
		{"negative_default_quota", "rules: []\ndefault_quota: {watchers: -1}\n", "", security.ErrBadPolicy},
		{"quota_named_twice", "rules: []\nquotas:\n  - {principal: a, locks: 3}\n  - {principal: a, waiters: 3}\n", "", security.ErrBadPolicy},
		{"token_not_a_digest", "rules: []\n", "tokens:\n  - principal: a\n    sha256: plaintext\n", security.ErrBadTokens},
	}
	saved := extraOptions
	extraOptions = []server.Option{server.WithBackend(func(bc backends.Config) (server.Backend, error) { return memraft.New(bc) })}
	t.Cleanup(func() { extraOptions = saved })
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := config.DefaultConfig()
			cfg.APIAddr = ticketdtest.FreeAddr(t)
			cfg.RaftAddr = "127.0.0.1:1"
			cfg.DataDir = filepath.Join(dir, "data")
			cfg.Log.Level = "error"
			cfg.AuthPolicyFile = filepath.Join(dir, "policy.yaml")
			require.NoError(t, os.WriteFile(cfg.AuthPolicyFile, []byte(tc.policy), 0o600))
			if tc.tokens != "" {
				cfg.AuthTokensFile = filepath.Join(dir, "tokens.yaml")
				require.NoError(t, os.WriteFile(cfg.AuthTokensFile, []byte(tc.tokens), 0o600))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := serve(ctx, cfg)
			require.ErrorIs(t, err, tc.want)
		})
	}
}
