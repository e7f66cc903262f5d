package transport

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
)

// serveHostileAnswers listens as a "peer" that answers every upgrade
// request with prefix and then fill repeated until 16 MiB are written (fill
// empty: nothing more), then holds the connection open until the sender
// closes it. It returns the address.
func serveHostileAnswers(t *testing.T, prefix, fill string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				if _, err := http.ReadRequest(bufio.NewReader(conn)); err != nil {
					return
				}
				if _, err := io.WriteString(conn, prefix); err != nil {
					return
				}
				for n := 0; fill != "" && n < 16<<20; n += len(fill) {
					if _, err := io.WriteString(conn, fill); err != nil {
						return
					}
				}
				_, _ = io.Copy(io.Discard, conn)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestUpgradeAnswerIsBounded: a "peer" (a compromised member, or a process
// on a member's address) that answers the upgrade with an endless status
// line, endless headers or an endless refusal body costs the sender at most
// maxUpgradeAnswer bytes, refused as "oversize" at once rather than read
// until SendTimeout; one that writes after its 101 is refused as "read".
// The send timeout is ten minutes, so only the bound ends the reads within
// the test's wait.
func TestUpgradeAnswerIsBounded(t *testing.T) {
	const switching = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + UpgradeProtocol + "\r\n"
	for _, tc := range []struct {
		name, prefix, fill, kind string
	}{
		{"endless_status_line", "HTTP/1.1 101 ", "aaaaaaaa", "oversize"},
		{"endless_headers", switching, "X-Pad: " + strings.Repeat("a", 1000) + "\r\n", "oversize"},
		{"endless_refusal_body", "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 1000000000\r\n\r\n", strings.Repeat("a", 1000), "oversize"},
		{"bytes_after_101", switching + "\r\n\xff\xff\xff\xff", "", "read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := serveHostileAnswers(t, tc.prefix, tc.fill)
			var counts errorCounts
			tr, err := New(Config{
				NodeID: 1, ID: "a", Addr: "127.0.0.1:1", BindAddr: "127.0.0.1:0",
				Deliver: newInbox().deliver, QueueSize: 64, CountError: counts.count,
				SendTimeout: 10 * time.Minute,
			})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, tr.Close()) })
			tr.SetPeer(2, addr)
			require.True(t, tr.Send(msg(2, pb.MsgApp, 1)))
			require.Eventually(t, func() bool { return counts.get(tc.kind) > 0 }, 30*time.Second, 10*time.Millisecond,
				"the sender is still reading the answer")
			select {
			case r := <-tr.Reports():
				require.Equal(t, Report{To: 2, Failed: true}, r)
			case <-time.After(30 * time.Second):
				t.Fatal("the failed send was not reported")
			}
		})
	}
}

// serveStalledHTTP2 listens as a "peer" of the previous release (POST
// routes only, so the upgrade is refused with 405, over h2c) that answers
// a message stream or a POSTed batch 200 at once and then never reads its
// body, granting no more flow-control window than 64 KiB. It returns the
// address.
func serveStalledHTTP2(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	stall := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done() // never reads the body
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+StreamPath, stall)
	mux.HandleFunc("POST "+Path, stall)
	srv := &http.Server{Handler: mux, Protocols: &protocols, HTTP2: &http.HTTP2Config{
		MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 64 << 10,
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// TestStalledHTTP2ReceiverIsBounded: to a stalled "peer" of the previous
// release (serveStalledHTTP2), a batch on the HTTP/2 message stream is
// held for at most SendTimeout and a snapshot for at most SnapshotTimeout:
// each is reported failed, the stream ended, and Close returns. Without
// closing the response body, neither the write nor the answer's read saw
// its context end, and the peer's goroutine, the snapshot's and Close
// waited for good.
func TestStalledHTTP2ReceiverIsBounded(t *testing.T) {
	for _, snapshot := range []bool{false, true} {
		t.Run(map[bool]string{false: "stream", true: "snapshot"}[snapshot], func(t *testing.T) {
			addr := serveStalledHTTP2(t)
			tr, err := New(Config{
				NodeID: 1, ID: "a", Addr: "127.0.0.1:1", BindAddr: "127.0.0.1:0",
				Deliver: newInbox().deliver, QueueSize: 64,
				SendTimeout: 500 * time.Millisecond, SnapshotTimeout: 500 * time.Millisecond,
			})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, tr.Close()) })
			tr.SetPeer(2, addr)
			m := msg(2, pb.MsgApp, 1)
			m.Entries = []*pb.Entry{{Data: make([]byte, 1<<20)}}
			if snapshot {
				m = &pb.Message{Type: pb.MsgSnap.Enum(), To: new(uint64(2)), From: new(uint64(1)),
					Snapshot: &pb.Snapshot{Data: make([]byte, 1<<20)}}
			}
			require.True(t, tr.Send(m))
			select {
			case r := <-tr.Reports():
				require.Equal(t, Report{To: 2, Snapshot: snapshot, Failed: true}, r)
			case <-time.After(30 * time.Second):
				t.Fatal("the stalled send was not ended")
			}
		})
	}
}
