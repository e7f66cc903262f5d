package server_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/memraft"
	"github.com/ticketd/ticketd/server/internal/nodetest"
	"github.com/ticketd/ticketd/server/security"
)

// TestTokensWithoutTLSWarn: a node given a tokens file but no client TLS
// logs a warning naming the file at start; with client TLS it does not.
func TestTokensWithoutTLSWarn(t *testing.T) {
	t.Parallel()
	for _, withTLS := range []bool{false, true} {
		p := nodetest.NewPKI(t)
		tokens := filepath.Join(p.Dir, "tokens.yaml")
		require.NoError(t, os.WriteFile(tokens, []byte("tokens:\n  - principal: bob\n    sha256: "+security.TokenDigest("s")+"\n"), 0o600))
		core, logs := observer.New(zapcore.WarnLevel)
		cfg := config.DefaultConfig()
		cfg.APIAddr, cfg.RaftAddr, cfg.DataDir = "127.0.0.1:1", "127.0.0.1:2", t.TempDir()
		cfg.AuthTokensFile = tokens
		if withTLS {
			cfg.CertFile, cfg.KeyFile = p.Path("node-n1.crt"), p.Path("node-n1.key")
		}
		n, err := server.New(cfg, server.WithLogger(zap.New(core)), server.WithBackend(func(bc backends.Config) (server.Backend, error) {
			return memraft.New(bc)
		}))
		require.NoError(t, err)
		require.NoError(t, n.Close(ctxT(t)))
		warned := logs.FilterMessageSnippet("bearer tokens cross the network in the clear").FilterField(zap.String("auth_tokens_file", tokens)).Len()
		if withTLS {
			require.Zero(t, warned, "client TLS on: no warning")
		} else {
			require.Equal(t, 1, warned, "tokens without client TLS: one warning naming the file")
		}
	}
}
