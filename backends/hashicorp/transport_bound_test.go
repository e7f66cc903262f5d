package hashicorp_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/core"
)

// peerErrors is a backends.Observer and backends.PeerObserver that records
// the peer transport errors it is told of (the timings are ignored).
type peerErrors struct {
	mu    sync.Mutex
	kinds map[string]int
}

func newPeerErrors() *peerErrors { return &peerErrors{kinds: map[string]int{}} }

func (o *peerErrors) LogAppended(int, time.Duration)             {}
func (o *peerErrors) SnapshotTaken(int64, time.Duration)         {}
func (o *peerErrors) Proposed(time.Duration)                     {}
func (o *peerErrors) Applied(int, time.Duration)                 {}
func (o *peerErrors) FollowerProgress(string, uint64, time.Time) {}

func (o *peerErrors) PeerTransportError(_, kind string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.kinds[kind]++
}

func (o *peerErrors) count(kind string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.kinds[kind]
}

var _ backends.PeerObserver = (*peerErrors)(nil)

// declaredAppendEntries returns the start of an AppendEntries RPC on
// hashicorp's wire (type byte, then msgpack) carrying one entry whose Data
// declares declared bytes: everything up to and including the str32 header,
// so that what follows on the connection is read as that entry's data.
func declaredAppendEntries(t *testing.T, leaderID, leaderAddr string, term uint64, declared uint32) []byte {
	t.Helper()
	// 60 KiB: raft's MsgpackHandle (no WriteExt) writes a []byte as a raw
	// str16, 0xda and a big-endian uint16 length.
	marker := bytes.Repeat([]byte("ticketd-marker-"), 4096)
	req := &raft.AppendEntriesRequest{
		RPCHeader:    header(leaderID, leaderAddr),
		Term:         term,
		PrevLogEntry: 1 << 40, // never matches: even a complete message would append nothing
		PrevLogTerm:  term,
		Entries:      []*raft.Log{{Index: 1<<40 + 1, Term: term, Type: raft.LogCommand, Data: marker}},
	}
	var buf bytes.Buffer
	buf.WriteByte(0) // rpcAppendEntries in net_transport.go
	if err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(req); err != nil {
		t.Fatal(err)
	}
	enc := buf.Bytes()
	i := bytes.Index(enc, marker)
	if i < 3 || enc[i-3] != 0xda || binary.BigEndian.Uint16(enc[i-2:i]) != uint16(len(marker)) {
		t.Fatalf("no str16 header before the entry data at %d: % x", i, enc[max(0, i-3):i])
	}
	out := append([]byte(nil), enc[:i-3]...)
	out = append(out, 0xdb) // str32
	return binary.BigEndian.AppendUint32(out, declared)
}

// TestOversizedPeerMessage: a peer that declares an entry of 1 GiB and
// starts sending it (plaintext on loopback, or holding a valid peer
// certificate) is cut off after Config.MaxMessageBytes: the refusal is
// logged and counted as "oversize", the follower's heap does not grow by
// what was sent, and the cluster goes on committing.
func TestOversizedPeerMessage(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  bool
	}{
		{"plaintext_loopback", false},
		{"valid_peer_certificate", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := newPeerErrors()
			zobs, logs := observer.New(zap.WarnLevel)
			c := backendtest.NewCluster(t, newNode)
			c.Tune = func(cfg *backends.Config) {
				cfg.MaxMessageBytes = backends.MinMaxMessageBytes
				cfg.Observer = obs
				cfg.Logger = zap.New(zobs)
			}
			var pki *backendtest.PKI
			if tc.tls {
				pki = backendtest.NewPKI(t, "ticketd peer CA")
				backendtest.UsePeerTLS(c, pki)
			}
			c.Start(3)
			l := c.WaitLeader()
			var f *backendtest.Peer
			for _, p := range c.Live() {
				if p != l {
					f = p
					break
				}
			}
			var conn net.Conn
			var err error
			if tc.tls {
				cfg := pki.PeerTLS(t, l.ID) // a member's certificate: only members get past the handshake
				cfg.ServerName = "127.0.0.1"
				conn, err = tls.Dial("tcp", f.Addr, cfg)
			} else {
				conn, err = net.Dial("tcp", f.Addr)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()

			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)

			const sent = 64 << 20
			prefix := declaredAppendEntries(t, l.ID, l.Addr, l.Node().Status().Term, 1<<30)
			_ = conn.SetWriteDeadline(time.Now().Add(backendtest.WaitTimeout))
			_, err = conn.Write(prefix)
			chunk := make([]byte, 64<<10)
			for n := 0; err == nil && n < sent; n += len(chunk) {
				_, err = conn.Write(chunk)
			}
			t.Logf("attacker stopped writing: %v", err)
			// The connection stays open on the attacker's side: without the
			// bound the follower would hold what it read, waiting for the rest.
			waitFor(t, "oversize counted", func() bool { return obs.count("oversize") > 0 })
			if n := logs.FilterMessage("refused peer message: too large, connection closed").Len(); n == 0 {
				t.Error("refusal not logged")
			}

			runtime.GC()
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			t.Logf("heap growth %d bytes after %d declared, up to %d sent", growth, 1<<30, sent)
			if growth > sent/2 {
				t.Errorf("heap grew by %d bytes: the follower kept what the attacker sent", growth)
			}

			ctx := t.Context()
			res, err := c.Propose(ctx, core.Grant("after", 60_000, "alice"))
			if err != nil {
				t.Fatalf("propose after the attack: %v", err)
			}
			c.WaitApplied(l.StateMachine().AppliedIndex())
			if _, ok := f.StateMachine().Get("after"); !ok {
				t.Errorf("follower %s did not apply the grant after the attack (result %v)", f.ID, res)
			}
		})
	}
}

// TestRefusedHandshakeCounted: a TLS peer port counts a handshake it refuses
// (a certificate from another CA) as a "handshake" peer transport error.
func TestRefusedHandshakeCounted(t *testing.T) {
	obs := newPeerErrors()
	pki := backendtest.NewPKI(t, "ticketd peer CA")
	c := backendtest.NewCluster(t, newNode)
	c.Tune = func(cfg *backends.Config) { cfg.Observer = obs }
	backendtest.UsePeerTLS(c, pki)
	ps := c.Start(1)
	c.WaitLeader()
	other := backendtest.NewPKI(t, "another CA")
	conn, err := tls.Dial("tcp", ps[0].Addr, &tls.Config{
		RootCAs: pki.Pool, ServerName: "127.0.0.1",
		GetClientCertificate: presentAnyway(other.NodeCert(t, "mallory")),
	})
	if err == nil {
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = conn.Read(make([]byte, 1))
		_ = conn.Close()
	}
	waitFor(t, "handshake refusal counted", func() bool { return obs.count("handshake") > 0 })
}

// TestFailedDialCounted: a leader that cannot reach a member it replicates
// to counts each failed dial as a "dial" peer transport error.
func TestFailedDialCounted(t *testing.T) {
	obs := newPeerErrors()
	c := backendtest.NewCluster(t, newNode)
	c.Tune = func(cfg *backends.Config) { cfg.Observer = obs }
	c.Start(1)
	l := c.WaitLeader()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	// Nothing listens there: the change cannot commit, but the leader
	// starts replicating to the new voter at once.
	_ = l.Node().AddVoter(ctx, core.Member{ID: "gone", RaftAddr: backendtest.FreeAddr(t)})
	waitFor(t, "failed dial counted", func() bool { return obs.count("dial") > 0 })
}
