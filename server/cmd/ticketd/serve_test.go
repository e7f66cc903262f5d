package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/memraft"
)

// TestServeExitsOnFatalRaftError: when the backend reports that its Raft
// stopped for good (OnFatal), `ticketd serve` returns an error wrapping it,
// so the process exits non-zero instead of staying half-alive.
func TestServeExitsOnFatalRaftError(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.APIAddr = ticketdtest.FreeAddr(t)
	cfg.RaftAddr = "127.0.0.1:1"
	cfg.DataDir = t.TempDir()
	cfg.Log.Level = "error"

	hooked := make(chan func(error), 1)
	saved := extraOptions
	extraOptions = []server.Option{
		server.WithBackend(func(bc backends.Config) (server.Backend, error) {
			hooked <- bc.OnFatal
			return memraft.New(bc)
		}),
	}
	t.Cleanup(func() { extraOptions = saved })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg) }()

	onFatal := <-hooked
	require.NotNil(t, onFatal)
	boom := errors.New("apply index 9: undecodable entry")
	onFatal(boom)
	select {
	case err := <-done:
		require.ErrorIs(t, err, errFatal)
		require.ErrorIs(t, err, boom)
	case <-ctx.Done():
		t.Fatal("serve did not return after a fatal Raft error")
	}
}
