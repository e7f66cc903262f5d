package nodetest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/memraft"
)

// clientTimeout bounds a test client's request and a standalone node's
// Close; assertions never depend on it.
const clientTimeout = 15 * time.Second

// Standalone is one node over memraft, served on loopback, without a
// Cluster (tests of the transport: TLS, limits, CORS, fail-stop).
type Standalone struct {
	Node    *server.Node
	Addr    string          // client API host:port
	Backend backends.Config // as the node gave it to its backend
	Mem     *memraft.Node
}

// StartStandalone starts a one-node cluster over memraft with the default
// config edited by edit (nil: unchanged); t.Cleanup closes it.
func StartStandalone(t testing.TB, edit func(*config.Config)) *Standalone {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := config.DefaultConfig()
	cfg.APIAddr = ln.Addr().String()
	cfg.RaftAddr = "127.0.0.1:1" // memraft has no peer port
	cfg.DataDir = t.TempDir()
	if edit != nil {
		edit(&cfg)
	}
	s := &Standalone{Addr: cfg.APIAddr}
	s.Node, err = server.New(cfg, server.WithBackend(func(bc backends.Config) (server.Backend, error) {
		s.Backend = bc
		n, err := memraft.New(bc)
		s.Mem = n
		return n, err
	}))
	if err != nil {
		_ = ln.Close()
		require.NoError(t, err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Node.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
		defer cancel()
		_ = s.Node.Close(ctx)
		<-done
	})
	return s
}
