package transport

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/backends/backendtest"
)

func startTLS(t *testing.T, id uint64, name string, in *inbox, cfg *tls.Config, log *zap.Logger) *Transport {
	t.Helper()
	tr, err := New(Config{NodeID: id, ID: name, Addr: "127.0.0.1:1", BindAddr: "127.0.0.1:0", Deliver: in.deliver, QueueSize: 64, TLS: cfg, Logger: log})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	return tr
}

// TestTLSPeersExchangeMessages: two transports with certificates of one CA
// talk HTTP/2 over mutual TLS.
func TestTLSPeersExchangeMessages(t *testing.T) {
	pki := backendtest.NewPKI(t, "peer CA")
	in := newInbox()
	a := startTLS(t, 1, "a", newInbox(), pki.PeerTLS(t, "a"), nil)
	b := startTLS(t, 2, "b", in, pki.PeerTLS(t, "b"), nil)
	a.SetPeer(2, b.Addr().String())
	for i := uint64(1); i <= 3; i++ {
		require.True(t, a.Send(msg(2, pb.MessageType_MsgApp, i)))
	}
	got := in.wait(t, 3)
	for i, m := range got {
		require.Equal(t, uint64(i+1), m.GetIndex())
	}
}

// TestTLSRefusesStrangers: a plaintext client, a TLS client without a
// certificate and one with a certificate from another CA cannot deliver a
// message to a TLS transport, neither in a POSTed batch over HTTP/2 nor on
// an upgraded stream; each refusal is logged.
func TestTLSRefusesStrangers(t *testing.T) {
	pki := backendtest.NewPKI(t, "peer CA")
	other := backendtest.NewPKI(t, "another CA")
	in := newInbox()
	obs, logs := observer.New(zap.WarnLevel)
	tr := startTLS(t, 2, "b", in, pki.PeerTLS(t, "b"), zap.New(obs))
	addr := tr.Addr().String()
	foreign := other.NodeCert(t, "mallory")

	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	var h2 http.Protocols
	h2.SetHTTP2(true)
	for _, tc := range []struct {
		name   string
		scheme string
		rt     *http.Transport
	}{
		{"plaintext_h2c", "http://", &http.Transport{Protocols: &h2c}},
		{"no_client_certificate", "https://", &http.Transport{Protocols: &h2, TLSClientConfig: &tls.Config{RootCAs: pki.Pool}}},
		{"certificate_from_another_ca", "https://", &http.Transport{Protocols: &h2, TLSClientConfig: &tls.Config{
			RootCAs: pki.Pool,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				return &foreign, nil
			},
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.rt.CloseIdleConnections()
			body := encodeBatch([][]byte{mustMarshal(t, msg(2, pb.MessageType_MsgVote, 1))})
			req, err := http.NewRequest(http.MethodPost, tc.scheme+addr+Path, bytes.NewReader(body))
			require.NoError(t, err)
			req.Header.Set(headerTo, "2")
			resp, err := (&http.Client{Transport: tc.rt, Timeout: 10 * time.Second}).Do(req)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("forged batch accepted: %s", resp.Status)
			}
			t.Logf("refused: %v", err)
		})
	}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
	}{
		{"upgrade_plaintext", nil},
		{"upgrade_no_client_certificate", &tls.Config{RootCAs: pki.Pool}},
		{"upgrade_certificate_from_another_ca", &tls.Config{RootCAs: pki.Pool,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &foreign, nil }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := openRawStream(t, addr, 2, framingUpgraded, tc.cfg)
			if err == nil {
				_, _ = s.w.Write(encodeBatch([][]byte{mustMarshal(t, msg(2, pb.MessageType_MsgVote, 1))}))
				t.Fatal("upgraded stream opened by a stranger")
			}
			t.Logf("refused: %v", err)
		})
	}
	in.mu.Lock()
	require.Zero(t, len(in.msgs), "messages delivered from strangers")
	in.mu.Unlock()
	require.Eventually(t, func() bool { return logs.FilterMessageSnippet("TLS handshake error").Len() >= 6 },
		10*time.Second, 10*time.Millisecond, "refused handshakes not logged")
}

func mustMarshal(t *testing.T, m *pb.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}

// totalAlloc returns the bytes allocated by the process so far.
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// TestReadMessageBoundsDeclaredLength: a declared length above the limit is
// refused before allocation, and one below it costs memory only for the
// bytes that arrive.
func TestReadMessageBoundsDeclaredLength(t *testing.T) {
	for _, tc := range []struct {
		name     string
		declared uint64
		want     error
	}{
		{"one_gib_over_limit", 1 << 30, ErrTooLarge},
		{"under_limit_but_truncated", 48 << 20, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wire := protowire.AppendVarint(nil, tc.declared)
			wire = append(wire, "only a few bytes"...)
			before := totalAlloc()
			tr := &Transport{cfg: Config{MaxMessageBytes: DefaultMaxMessageBytes, MaxBufferedBytes: 2 * DefaultMaxMessageBytes}}
			_, err := tr.readMessage(bufio.NewReader(bytes.NewReader(wire)))
			allocated := totalAlloc() - before
			require.ErrorIs(t, err, tc.want)
			require.Less(t, allocated, uint64(1<<20), "bytes allocated for a %d-byte declaration", tc.declared)
		})
	}
}

// TestOversizedStreamMessageIsRefused: a peer that opens a stream, in
// either framing, and declares a 1 GiB message has its stream ended
// without the transport allocating the message, and nothing is delivered;
// the refusal is logged.
func TestOversizedStreamMessageIsRefused(t *testing.T) {
	for _, framing := range framings {
		t.Run(framing, func(t *testing.T) {
			in := newInbox()
			obs, logs := observer.New(zap.WarnLevel)
			tr, err := New(Config{NodeID: 2, ID: "b", Addr: "127.0.0.1:1", BindAddr: "127.0.0.1:0", Deliver: in.deliver, Logger: zap.New(obs)})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, tr.Close()) })

			before := totalAlloc()
			s, err := openRawStream(t, tr.Addr().String(), 2, framing, nil)
			require.NoError(t, err)
			go func() {
				_, _ = s.w.Write(protowire.AppendVarint(nil, 1<<30))
				_, _ = s.w.Write(bytes.Repeat([]byte{'x'}, 1024))
				// Keep the stream open: only the receiver may end it.
			}()
			s.waitEnded(t)
			require.Less(t, totalAlloc()-before, uint64(256<<20), "bytes allocated while refusing a 1 GiB message")
			require.Eventually(t, func() bool {
				return logs.FilterMessage("refused peer stream").Len() == 1
			}, 10*time.Second, 10*time.Millisecond)
			var tooLarge bool
			for _, e := range logs.FilterMessage("refused peer stream").All() {
				if err, ok := e.ContextMap()["error"].(string); ok && bytes.Contains([]byte(err), []byte("too large")) {
					tooLarge = true
				}
			}
			require.True(t, tooLarge, "refusal does not say the message is too large")
			in.mu.Lock()
			require.Zero(t, len(in.msgs))
			in.mu.Unlock()
		})
	}
}

// TestOversizedBatchIsRefused: a POSTed batch longer than MaxMessageBytes is
// answered 413 without being read.
func TestOversizedBatchIsRefused(t *testing.T) {
	in := newInbox()
	tr, err := New(Config{NodeID: 2, ID: "b", Addr: "127.0.0.1:1", BindAddr: "127.0.0.1:0", Deliver: in.deliver, MaxMessageBytes: 1 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	req, err := http.NewRequest(http.MethodPost, "http://"+tr.Addr().String()+Path, bytes.NewReader(make([]byte, 2<<20)))
	require.NoError(t, err)
	req.Header.Set(headerTo, "2")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
}
