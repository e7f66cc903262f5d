package server_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/memraft"
	"github.com/ticketd/ticketd/server/security"
)

func TestInsecureExposureRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(c *config.Config)
		ok   bool
	}{
		{"public_api_plaintext", func(c *config.Config) { c.APIAddr = "192.0.2.10:7001" }, false},
		{"public_raft_plaintext", func(c *config.Config) { c.RaftAddr = "0.0.0.0:7101" }, false},
		{"public_api_insecure_flag", func(c *config.Config) { c.APIAddr = "192.0.2.10:7001"; c.Insecure = true }, true},
		{"loopback_plaintext", func(c *config.Config) {}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.DefaultConfig()
			cfg.DataDir = t.TempDir()
			tt.edit(&cfg)
			cfg.Bootstrap = nil
			n, err := server.New(cfg, server.WithBackend(func(bc backends.Config) (server.Backend, error) { return memraft.New(bc) }))
			if tt.ok {
				require.NoError(t, err)
				require.NoError(t, n.Close(ctxT(t)))
				return
			}
			require.ErrorIs(t, err, security.ErrInsecureExposure)
			assert.Contains(t, err.Error(), "--insecure")
		})
	}
}
