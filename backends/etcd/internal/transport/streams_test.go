package transport

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPeerServerLimitsConcurrentStreams
// (docs/security.md#peer-transport-bounds): one HTTP/2 connection to the peer
// port may open at most MaxConcurrentStreams streams (Go's default was 250,
// each able to hold a partial message). The server's SETTINGS frame, read from
// a raw cleartext HTTP/2 connection, must announce the limit; the HTTP/2
// server refuses streams past it (REFUSED_STREAM).
func TestPeerServerLimitsConcurrentStreams(t *testing.T) {
	tr, err := New(Config{NodeID: 2, ID: "b", Addr: "127.0.0.1:1", BindAddr: "127.0.0.1:0", Deliver: newInbox().deliver})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	conn, err := net.Dial("tcp", tr.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	// Client preface and an empty SETTINGS frame.
	_, err = conn.Write(append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0))
	require.NoError(t, err)
	var limit uint32
	found := false
	for !found {
		var h [9]byte
		_, err := io.ReadFull(conn, h[:])
		require.NoError(t, err, "no SETTINGS frame from the server")
		length := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		payload := make([]byte, length)
		_, err = io.ReadFull(conn, payload)
		require.NoError(t, err)
		const frameSettings, flagAck = 0x4, 0x1
		if h[3] != frameSettings || h[4]&flagAck != 0 {
			continue
		}
		for i := 0; i+6 <= len(payload); i += 6 {
			const settingsMaxConcurrentStreams = 0x3
			if binary.BigEndian.Uint16(payload[i:]) == settingsMaxConcurrentStreams {
				limit, found = binary.BigEndian.Uint32(payload[i+2:]), true
			}
		}
		require.True(t, found, "the server's SETTINGS do not limit concurrent streams")
	}
	require.Equal(t, uint32(MaxConcurrentStreams), limit)
}
