package transport

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ticketd/ticketd/backends/backendtest"
)

// errorCounts records Config.CountError calls by kind.
type errorCounts struct {
	mu    sync.Mutex
	kinds map[string]int
}

func (c *errorCounts) count(_, kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kinds == nil {
		c.kinds = map[string]int{}
	}
	c.kinds[kind]++
}

func (c *errorCounts) get(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kinds[kind]
}

func startCounted(t *testing.T, id uint64, cfg *tls.Config, counts *errorCounts) *Transport {
	t.Helper()
	tr, err := New(Config{
		NodeID: id, ID: strconv.FormatUint(id, 10), Addr: "127.0.0.1:1", BindAddr: "127.0.0.1:0",
		Deliver: newInbox().deliver, QueueSize: 64, TLS: cfg, CountError: counts.count,
		MaxMessageBytes: 1 << 20,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	return tr
}

// TestPeerErrorsAreCounted: a refused handshake is counted on both sides
// (the dialling node and the refusing one), a failed dial and an oversized
// declared message are counted too (ticketd_peer_transport_errors_total).
func TestPeerErrorsAreCounted(t *testing.T) {
	pki := backendtest.NewPKI(t, "peer CA")
	other := backendtest.NewPKI(t, "another CA")

	t.Run("handshake_refused_both_ways", func(t *testing.T) {
		var dialler, refuser errorCounts
		a := startCounted(t, 1, other.PeerTLS(t, "a"), &dialler)
		b := startCounted(t, 2, pki.PeerTLS(t, "b"), &refuser)
		a.SetPeer(2, b.Addr().String())
		require.True(t, a.Send(msg(2, pb.MessageType_MsgHeartbeat, 0)))
		require.Eventually(t, func() bool { return dialler.get("handshake") > 0 && refuser.get("handshake") > 0 },
			10*time.Second, 10*time.Millisecond, "handshake refusals counted: dialler %d, refuser %d", dialler.get("handshake"), refuser.get("handshake"))
		require.Zero(t, dialler.get("dial"), "a refused handshake is not a failed dial")
	})

	t.Run("dial_failed", func(t *testing.T) {
		var counts errorCounts
		a := startCounted(t, 1, nil, &counts)
		a.SetPeer(2, closedAddr(t))
		require.True(t, a.Send(msg(2, pb.MessageType_MsgHeartbeat, 0)))
		require.Eventually(t, func() bool { return counts.get("dial") > 0 }, 10*time.Second, 10*time.Millisecond)
	})

	t.Run("oversize", func(t *testing.T) {
		var counts errorCounts
		b := startCounted(t, 2, nil, &counts)
		var h2c http.Protocols
		h2c.SetUnencryptedHTTP2(true)
		rt := &http.Transport{Protocols: &h2c}
		defer rt.CloseIdleConnections()
		pr, pw := io.Pipe()
		defer pw.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+b.Addr().String()+StreamPath, pr)
		require.NoError(t, err)
		req.Header.Set(headerTo, "2")
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		_, _ = pw.Write(protowire.AppendVarint(nil, 1<<30))
		require.Eventually(t, func() bool { return counts.get("oversize") == 1 }, 10*time.Second, 10*time.Millisecond)
	})
}
