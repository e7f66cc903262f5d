package hashicorp_test

import (
	"bytes"
	"crypto/tls"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
)

// TestPeerCertificateBindsSender: over mutual TLS a request must claim, in
// its RPCHeader.ID, the member its peer certificate names. A valid node
// certificate for n1 claiming to be n3 in a RequestVote at a much higher
// term (forcing an election) is refused before raft reads it,
// counted as "identity", and the term does not move; the same certificate
// claiming its own id is answered. A certificate naming no member (one
// shared by all nodes) is refused whatever it claims.
func TestPeerCertificateBindsSender(t *testing.T) {
	obs := newPeerErrors()
	pki := backendtest.NewPKI(t, "ticketd peer CA")
	c := backendtest.NewCluster(t, newNode)
	c.Tune = func(cfg *backends.Config) { cfg.Observer = obs }
	backendtest.UsePeerTLS(c, pki)
	c.Start(3)
	l := c.WaitLeader()
	term := l.Node().Status().Term
	fs := c.Followers(l)
	f, other := fs[0], fs[1]
	cfg := pki.PeerTLS(t, l.ID) // a real node certificate, for the leader's id
	cfg.ServerName = "127.0.0.1"
	var voteWith func(t *testing.T, cfg *tls.Config, id, addr string, term uint64) (int, error)
	vote := func(t *testing.T, id, addr string, term uint64) (int, error) {
		t.Helper()
		return voteWith(t, cfg, id, addr, term)
	}
	voteWith = func(t *testing.T, cfg *tls.Config, id, addr string, term uint64) (int, error) {
		t.Helper()
		conn, err := tls.Dial("tcp", f.Addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var buf bytes.Buffer
		buf.WriteByte(1) // rpcRequestVote
		req := &raft.RequestVoteRequest{RPCHeader: header(id, addr), Term: term, LastLogIndex: 1 << 40, LastLogTerm: term}
		if err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(req); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(backendtest.WaitTimeout))
		if _, err := conn.Write(buf.Bytes()); err != nil {
			return 0, err
		}
		return conn.Read(make([]byte, 256))
	}

	t.Run("claims_another_member", func(t *testing.T) {
		if n, err := vote(t, other.ID, other.Addr, term+10); err == nil {
			t.Fatalf("forged RequestVote answered (%d bytes)", n)
		}
		waitFor(t, "identity refusal counted", func() bool { return obs.count("identity") > 0 })
	})
	t.Run("claims_its_own_id", func(t *testing.T) {
		if _, err := vote(t, l.ID, l.Addr, term); err != nil {
			t.Fatalf("RequestVote under the certificate's own id not answered: %v", err)
		}
	})
	t.Run("certificate_naming_no_member", func(t *testing.T) {
		shared := pki.PeerTLS(t, "node")
		shared.ServerName = "127.0.0.1"
		if n, err := voteWith(t, shared, other.ID, other.Addr, term); err == nil {
			t.Fatalf("RequestVote under a certificate naming no member answered (%d bytes)", n)
		}
	})
	if got := f.Node().Status().Term; got != term {
		t.Errorf("follower's term moved from %d to %d", term, got)
	}
}
