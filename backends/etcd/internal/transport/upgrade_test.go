package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/backends/internal/peergate"
)

// The two framings of a message stream (package comment): the upgraded
// connection this release sends on, and the HTTP/2 POST of the previous
// release, still served.
const (
	framingUpgraded = "upgraded"
	framingHTTP2    = "http2"
)

var framings = []string{framingUpgraded, framingHTTP2}

// rawStream is a message stream a test opened by hand, as a stranger who
// read the package comment would: w takes the stream's bytes, ended is
// closed once the receiver has ended the stream.
type rawStream struct {
	w     io.Writer
	ended chan struct{}
}

// openRawStream opens a message stream to node to at addr in framing,
// over TLS with cfg when it is not nil, as member "x" at "127.0.0.1:1". The
// stream is closed when the test ends.
func openRawStream(t *testing.T, addr string, to uint64, framing string, cfg *tls.Config) (*rawStream, error) {
	t.Helper()
	if framing == framingHTTP2 {
		return openRawHTTP2Stream(t, addr, to, cfg)
	}
	var conn net.Conn
	var err error
	if cfg == nil {
		conn, err = net.Dial("tcp", addr)
	} else {
		c := backends.PeerClientTLS(cfg, "127.0.0.1")
		c.NextProtos = []string{"http/1.1"}
		conn, err = tls.Dial("tcp", addr, c)
	}
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+StreamPath, nil)
	require.NoError(t, err)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", UpgradeProtocol)
	req.Header.Set(headerTo, strconv.FormatUint(to, 10))
	req.Header.Set(headerFromID, "x")
	req.Header.Set(headerFromAddr, "127.0.0.1:1")
	if err := req.Write(conn); err != nil {
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return nil, fmt.Errorf("upgrade answered %s", resp.Status)
	}
	require.NoError(t, conn.SetDeadline(time.Time{}))
	s := &rawStream{w: conn, ended: make(chan struct{})}
	go func() {
		defer close(s.ended)
		_, _ = io.Copy(io.Discard, br)
	}()
	return s, nil
}

// openRawHTTP2Stream is openRawStream's HTTP/2 POST.
func openRawHTTP2Stream(t *testing.T, addr string, to uint64, cfg *tls.Config) (*rawStream, error) {
	var protocols http.Protocols
	scheme := "http://"
	if cfg == nil {
		protocols.SetUnencryptedHTTP2(true)
	} else {
		protocols.SetHTTP2(true)
		scheme = "https://"
	}
	rt := &http.Transport{Protocols: &protocols, TLSClientConfig: cfg}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	t.Cleanup(func() {
		_ = pw.Close()
		cancel()
		rt.CloseIdleConnections()
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+addr+StreamPath, pr)
	require.NoError(t, err)
	req.Header.Set(headerTo, strconv.FormatUint(to, 10))
	req.Header.Set(headerFromID, "x")
	req.Header.Set(headerFromAddr, "127.0.0.1:1")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("stream answered %s", resp.Status)
	}
	s := &rawStream{w: pw, ended: make(chan struct{})}
	go func() {
		defer close(s.ended)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
	return s, nil
}

// waitEnded fails the test unless the receiver ends s within 10 seconds.
func (s *rawStream) waitEnded(t *testing.T) {
	t.Helper()
	select {
	case <-s.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the receiver did not end the stream")
	}
}

// upgradedCount returns how many upgraded streams tr is reading.
func upgradedCount(tr *Transport) int {
	tr.upgraded.mu.Lock()
	defer tr.upgraded.mu.Unlock()
	return len(tr.upgraded.conns)
}

// breakUpgraded closes the connections of tr's upgraded streams, as a
// network failure would.
func breakUpgraded(tr *Transport) {
	tr.upgraded.mu.Lock()
	defer tr.upgraded.mu.Unlock()
	for c := range tr.upgraded.conns {
		_ = c.Close()
	}
}

// pairConfig is the TLS configuration of two transports a and b (nil:
// plaintext).
type pairConfig struct {
	name string
	a, b *tls.Config
}

// plaintextAndTLS returns a plaintext pair and a pair with certificates of
// one CA for a and b.
func plaintextAndTLS(t *testing.T) []pairConfig {
	pki := backendtest.NewPKI(t, "peer CA")
	return []pairConfig{
		{"plaintext", nil, nil},
		{"mutual_tls", pki.PeerTLS(t, "a"), pki.PeerTLS(t, "b")},
	}
}

// TestStreamsAreUpgraded: between two transports of this release, plaintext
// and over mutual TLS, messages travel in order on an upgraded connection
// (the receiver reads it in its handler), not on an HTTP/2 stream.
func TestStreamsAreUpgraded(t *testing.T) {
	for _, tc := range plaintextAndTLS(t) {
		t.Run(tc.name, func(t *testing.T) {
			bIn := newInbox()
			ta := startTLS(t, 1, "a", newInbox(), tc.a, nil)
			tb := startTLS(t, 2, "b", bIn, tc.b, nil)
			ta.SetPeer(2, tb.Addr().String())
			for i := uint64(1); i <= 20; i++ {
				require.True(t, ta.Send(msg(2, pb.MsgApp, i)))
			}
			for i, m := range bIn.wait(t, 20) {
				require.Equal(t, uint64(i+1), m.GetIndex())
			}
			require.Equal(t, 1, upgradedCount(tb), "streams read on an upgraded connection")
		})
	}
}

// servePreviousRelease serves tr's handlers at a new address the way the
// previous release's transport did: POST routes only, over HTTP/2 only
// (h2c with prior knowledge beside HTTP/1.1 in plaintext, ALPN h2 alone
// over TLS with cfg). It returns the address.
func servePreviousRelease(t *testing.T, tr *Transport, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var protocols http.Protocols
	if cfg == nil {
		protocols.SetHTTP1(true)
		protocols.SetUnencryptedHTTP2(true)
	} else {
		protocols.SetHTTP2(true)
		s := backends.PeerServerTLS(cfg)
		s.NextProtos = []string{"h2"}
		ln = tls.NewListener(ln, s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+Path, tr.serveBatch)
	mux.HandleFunc("POST "+StreamPath, tr.serveStream)
	srv := &http.Server{Handler: mux, Protocols: &protocols}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return ln.Addr().String()
}

// TestPreviousReleaseInterop
// (docs/operations.md#peer-transport-between-releases-etcd-backend): a node
// of this release and one of the previous release exchange messages both
// ways, plaintext and over mutual TLS. Sending to the previous release, the
// upgrade is refused (405 in plaintext, h2 negotiated over TLS) and the
// sender falls back to the HTTP/2 stream; the previous release's HTTP/2
// stream is still read.
func TestPreviousReleaseInterop(t *testing.T) {
	for _, tc := range plaintextAndTLS(t) {
		t.Run(tc.name+"/to_previous_release", func(t *testing.T) {
			bIn := newInbox()
			ta := startTLS(t, 1, "a", newInbox(), tc.a, nil)
			tb := startTLS(t, 2, "b", bIn, tc.b, nil)
			ta.SetPeer(2, servePreviousRelease(t, tb, tc.b))
			for i := uint64(1); i <= 20; i++ {
				require.True(t, ta.Send(msg(2, pb.MsgApp, i)))
			}
			for i, m := range bIn.wait(t, 20) {
				require.Equal(t, uint64(i+1), m.GetIndex())
			}
			require.Zero(t, upgradedCount(tb))
		})
		t.Run(tc.name+"/from_previous_release", func(t *testing.T) {
			bIn := newInbox()
			ta := startTLS(t, 1, "a", newInbox(), tc.a, nil)
			tb := startTLS(t, 2, "b", bIn, tc.b, nil)
			ta.SetPeer(2, tb.Addr().String())
			// The previous release's sender: the HTTP/2 POST stream.
			st, err := ta.openH2Stream(ta.peers[2])
			require.NoError(t, err)
			defer st.close()
			var batch [][]byte
			for i := uint64(1); i <= 20; i++ {
				batch = append(batch, mustMarshal(t, msg(2, pb.MsgApp, i)))
			}
			require.NoError(t, st.write(encodeBatch(batch)))
			for i, m := range bIn.wait(t, 20) {
				require.Equal(t, uint64(i+1), m.GetIndex())
			}
			require.Zero(t, upgradedCount(tb))
		})
	}
}

// TestBrokenStreamIsReopened: when the connection of an upgraded stream
// breaks, the sender reports the peer unreachable and opens a new one, on
// which messages arrive again.
func TestBrokenStreamIsReopened(t *testing.T) {
	bIn := newInbox()
	ta := start(t, 1, "a", newInbox())
	tb := start(t, 2, "b", bIn)
	ta.SetPeer(2, tb.Addr().String())
	require.True(t, ta.Send(msg(2, pb.MsgApp, 1)))
	bIn.wait(t, 1)
	breakUpgraded(tb)
	i := uint64(1)
	require.Eventually(t, func() bool {
		i++
		ta.Send(msg(2, pb.MsgApp, i))
		bIn.mu.Lock()
		defer bIn.mu.Unlock()
		return len(bIn.msgs) > 1
	}, 10*time.Second, 20*time.Millisecond, "no message arrived after the stream broke")
	require.Equal(t, 1, upgradedCount(tb))
}

// TestUpgradedStreamIdleTimeout: an upgraded stream on which nothing arrives
// for IdleTimeout is ended by the receiver (net/http no longer times out a
// hijacked connection).
func TestUpgradedStreamIdleTimeout(t *testing.T) {
	tr, err := New(Config{NodeID: 2, ID: "b", Addr: "127.0.0.1:1", BindAddr: "127.0.0.1:0", Deliver: newInbox().deliver, IdleTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	s, err := openRawStream(t, tr.Addr().String(), 2, framingUpgraded, nil)
	require.NoError(t, err)
	s.waitEnded(t)
}

// TestUpgradeIsRefusedClearly: a GET without the upgrade is answered 426
// naming the protocol, an upgrade to another node 421; neither upgrades the
// connection.
func TestUpgradeIsRefusedClearly(t *testing.T) {
	tr := start(t, 2, "b", newInbox())
	for _, tc := range []struct {
		name    string
		to      string
		upgrade bool
		want    int
	}{
		{"no_upgrade", "2", false, http.StatusUpgradeRequired},
		{"another_node", "3", true, http.StatusMisdirectedRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, "http://"+tr.Addr().String()+StreamPath, nil)
			require.NoError(t, err)
			req.Header.Set(headerTo, tc.to)
			if tc.upgrade {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", UpgradeProtocol)
			}
			rt := &http.Transport{}
			defer rt.CloseIdleConnections()
			resp, err := rt.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, tc.want, resp.StatusCode)
			require.Zero(t, upgradedCount(tr))
		})
	}
}

// TestUpgradedStreamBindsSender: over mutual TLS with a Gate, an upgraded
// stream under member a's certificate carrying a message from another raft
// id is ended (ErrForgedSender, counted as "identity") and the message not
// delivered; the same certificate's own messages are.
func TestUpgradedStreamBindsSender(t *testing.T) {
	pki := backendtest.NewPKI(t, "peer CA")
	ids := map[string]uint64{"a": 1, "b": 2}
	gate := peergate.New(func() ([]string, bool) { return []string{"a", "b"}, true }, nil, nil)
	in := newInbox()
	var counts errorCounts
	tr, err := New(Config{
		NodeID: 2, ID: "b", Addr: "127.0.0.1:1", BindAddr: "127.0.0.1:0", Deliver: in.deliver,
		TLS: pki.PeerTLS(t, "b"), Gate: gate, RaftID: func(id string) uint64 { return ids[id] }, CountError: counts.count,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tr.Close()) })

	forged, err := openRawStream(t, tr.Addr().String(), 2, framingUpgraded, pki.PeerTLS(t, "a"))
	require.NoError(t, err)
	m := msg(2, pb.MsgHeartbeat, 0)
	m.From = new(uint64(3))
	_, err = forged.w.Write(encodeBatch([][]byte{mustMarshal(t, m)}))
	require.NoError(t, err)
	forged.waitEnded(t)
	require.Equal(t, 1, counts.get("identity"))

	own, err := openRawStream(t, tr.Addr().String(), 2, framingUpgraded, pki.PeerTLS(t, "a"))
	require.NoError(t, err)
	_, err = own.w.Write(encodeBatch([][]byte{mustMarshal(t, msg(2, pb.MsgHeartbeat, 7))}))
	require.NoError(t, err)
	got := in.wait(t, 1)
	require.Len(t, got, 1)
	require.Equal(t, uint64(1), got[0].GetFrom())
}

// TestUpgradedStreamKeepsItsConnectionSlot: an upgraded connection still
// counts against MaxConnsPerIP (package peerlimit), so with a cap of one a
// second connection from the same IP is refused while the stream goes on.
func TestUpgradedStreamKeepsItsConnectionSlot(t *testing.T) {
	in := newInbox()
	var counts errorCounts
	tr, err := New(Config{
		NodeID: 2, ID: "b", Addr: "127.0.0.1:1", BindAddr: "127.0.0.1:0", Deliver: in.deliver,
		MaxConnsPerIP: 1, CountError: counts.count,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	s, err := openRawStream(t, tr.Addr().String(), 2, framingUpgraded, nil)
	require.NoError(t, err)

	second, err := net.Dial("tcp", tr.Addr().String())
	require.NoError(t, err)
	defer second.Close()
	require.NoError(t, second.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = second.Read(make([]byte, 1))
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "second connection still open: %v", err)
	require.Eventually(t, func() bool { return counts.get("refused") == 1 }, 10*time.Second, 10*time.Millisecond)

	_, err = s.w.Write(encodeBatch([][]byte{mustMarshal(t, msg(2, pb.MsgApp, 1))}))
	require.NoError(t, err)
	in.wait(t, 1)
}
