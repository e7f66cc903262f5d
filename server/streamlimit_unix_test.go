//go:build unix

package server_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/config"
)

// TestStreamWriteLimitEndsUnreadConnection: a client that stops reading
// its connection altogether (it asks for a snapshot of about 6 MB, more
// than the loopback socket buffers hold, opens every HTTP/2 window, and
// never reads its socket) does not hold the Snapshot handler: it returns,
// and the snapshot is cut short (docs/security.md#stalled-readers).
//   - Over HTTP/1.1 the stream is the connection: the write the limit
//     cuts fails and the node closes the connection.
//   - Over HTTP/2 the stream's reset is a frame queued behind the one
//     stuck in the socket: the stream ends with it, or with the
//     connection, which the node closes once no byte could be written to
//     it for the limit (WriteByteTimeout). Without that bound the frame
//     writer waits on the socket for ever, and the handler with it.
//
// The lock table stands on the in-memory consensus stand-in: only its
// size matters here.
func TestStreamWriteLimitEndsUnreadConnection(t *testing.T) {
	const (
		limit = time.Second
		locks = 6000
	)
	in, _ := memNode(t, withConfig(func(c *config.Config) { c.Limits.StreamWriteTimeoutMS = limit.Milliseconds() }))
	ctx := ctxT(t)
	long := strings.Repeat("k", 1000)
	for i := range locks {
		_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: fmt.Sprintf("big/%05d/%s", i, long), LeaseMs: 600_000, Owner: "o"})
		require.NoError(t, err)
	}
	snapshotBytes := int64(locks * len(long))
	request := binary.BigEndian.AppendUint32([]byte{0}, 0) // Connect envelope of an empty SnapshotRequest

	t.Run("HTTP/2", func(t *testing.T) {
		conn := dialUnread(t, in.Addr)
		id := newRawH2(t, conn, in.Addr, 1<<31-1).openStream(ticketv1connect.ClusterServiceSnapshotProcedure, nil)
		awaitSnapshotHandler(t)
		// Now read: the stream ends, reset or with the connection, before
		// the whole snapshot.
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(safety)))
		fr := http2.NewFramer(io.Discard, conn)
		var n int64
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the stream stays open: %v after %d bytes", err, n)
				break
			}
			if f, ok := f.(*http2.DataFrame); ok && f.StreamID == id {
				n += int64(len(f.Data()))
				require.False(t, f.StreamEnded(), "the whole snapshot was sent")
			}
			if f, ok := f.(*http2.RSTStreamFrame); ok && f.StreamID == id {
				break
			}
		}
		require.Less(t, n, snapshotBytes)
	})
	t.Run("HTTP/1.1", func(t *testing.T) {
		conn := dialUnread(t, in.Addr)
		_, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/connect+proto\r\n"+
			"Connect-Protocol-Version: 1\r\nContent-Length: %d\r\n\r\n%s",
			ticketv1connect.ClusterServiceSnapshotProcedure, in.Addr, len(request), request)
		require.NoError(t, err)
		awaitSnapshotHandler(t)
		// Now read: the connection ends before the whole snapshot.
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(safety)))
		n, err := io.Copy(io.Discard, conn)
		require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the node keeps the connection open: %v after %d bytes", err, n)
		require.Less(t, n, snapshotBytes)
	})
}

// dialUnread connects to addr with a receive buffer of a few KiB (the
// kernel's least), so that what a node sends and the client does not read
// fills the node's send buffer (at most net.ipv4.tcp_wmem's 4 MiB), not
// the client's. The connection is closed when the test ends.
func dialUnread(t *testing.T, addr string) net.Conn {
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.DialContext(ctxT(t), "tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// awaitSnapshotHandler waits until a Snapshot handler starts, then until
// none runs.
func awaitSnapshotHandler(t *testing.T) {
	const snapshot = "server.(*clusterService).Snapshot"
	awaitGoroutineIn(t, snapshot)
	awaitNoGoroutineIn(t, snapshot)
}
