package main

import (
	"context"
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

// TestServeRefusesAnotherNodesPeerCertificate: `ticketd serve --id n1`
// with n2's peer certificate (or any not naming n1, as one shared by all
// nodes would) stops at start with an error naming both ids, instead of
// running a node its peers refuse to hear.
func TestServeRefusesAnotherNodesPeerCertificate(t *testing.T) {
	saved := extraOptions
	extraOptions = []server.Option{server.WithBackend(func(bc backends.Config) (server.Backend, error) { return memraft.New(bc) })}
	t.Cleanup(func() { extraOptions = saved })
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	_, err := security.CreateCA(certs, time.Hour, false)
	require.NoError(t, err)
	_, err = security.CreateNode(certs, "n2", []string{"127.0.0.1"}, time.Hour, false)
	require.NoError(t, err)

	cfg := config.DefaultConfig()
	cfg.ID = "n1"
	cfg.APIAddr = ticketdtest.FreeAddr(t)
	cfg.RaftAddr = "127.0.0.1:1"
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Log.Level = "error"
	crt, key := security.NodeFiles("n2")
	cfg.PeerCertFile, cfg.PeerKeyFile = filepath.Join(certs, crt), filepath.Join(certs, key)
	cfg.PeerTrustedCAFile = filepath.Join(certs, security.CACertFile)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = serve(ctx, cfg)
	require.ErrorIs(t, err, security.ErrWrongNode)
	require.ErrorContains(t, err, `names "n2" but this node's --id is "n1"`)
}
