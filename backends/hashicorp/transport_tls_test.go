package hashicorp_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/core"
)

// attacker is a stranger on the network speaking hashicorp's own wire
// protocol: raft.NetworkTransport over plain TCP, without any certificate, as
// a stranger on the network would attack it.
func attacker(t *testing.T) *raft.NetworkTransport {
	t.Helper()
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatalf("attacker transport: %v", err)
	}
	t.Cleanup(func() {
		// Close does not close the pooled outbound connections; without
		// CloseStreams the nodes' handleConn goroutines keep reading from
		// them after the test (goleak in TestMain).
		tr.CloseStreams()
		_ = tr.Close()
	})
	return tr
}

func header(id, addr string) raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(addr)}
}

// TestForgedRaftRPCs replays forged-peer attacks from a process without
// the peer certificate: a forged RequestVote (term jump, forced election), a
// forged AppendEntries carrying a lock, and an undecodable entry. With
// PeerTLS every one is refused at the handshake and changes nothing; without
// it (the control) each reaches Raft and does its harm, which is what makes
// this test fail if the TLS stream layer stops being used.
func TestForgedRaftRPCs(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  bool
	}{
		{"mutual_tls_refuses", true},
		{"plaintext_control", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fatal atomic.Int32
			c := backendtest.NewCluster(t, newNode)
			c.Tune = func(cfg *backends.Config) {
				cfg.OnFatal = func(error) { fatal.Add(1) }
			}
			if tc.tls {
				backendtest.UsePeerTLS(c, backendtest.NewPKI(t, "ticketd peer CA"))
			}
			c.Start(3)
			l := c.WaitLeader()
			ctx := t.Context()
			if _, err := l.Node().Propose(ctx, core.Grant("real", 60_000, "alice")); err != nil {
				t.Fatalf("grant: %v", err)
			}
			c.WaitApplied(l.StateMachine().AppliedIndex())
			var f1, f2 *backendtest.Peer
			for _, p := range c.Live() {
				if p == l {
					continue
				}
				if f1 == nil {
					f1 = p
				} else {
					f2 = p
				}
			}
			atk := attacker(t)

			// 1. A forged AppendEntries on follower f1 in the leader's own
			// term, carrying a lock that no client asked for.
			st := f1.Node().Status()
			last := f1.StateMachine().AppliedIndex()
			forged, err := core.Encode(core.Grant("forged", 60_000, "mallory"))
			if err != nil {
				t.Fatal(err)
			}
			ae := &raft.AppendEntriesRequest{
				RPCHeader:         header(l.ID, l.Addr),
				Term:              st.Term,
				PrevLogEntry:      last,
				PrevLogTerm:       st.Term,
				Entries:           []*raft.Log{{Index: last + 1, Term: st.Term, Type: raft.LogCommand, Data: forged}},
				LeaderCommitIndex: last + 1,
			}
			var aeResp raft.AppendEntriesResponse
			aeErr := atk.AppendEntries(raft.ServerID(f1.ID), raft.ServerAddress(f1.Addr), ae, &aeResp)

			// 2. An undecodable entry on follower f2.
			st2 := f2.Node().Status()
			last2 := f2.StateMachine().AppliedIndex()
			poison := &raft.AppendEntriesRequest{
				RPCHeader:         header(l.ID, l.Addr),
				Term:              st2.Term,
				PrevLogEntry:      last2,
				PrevLogTerm:       st2.Term,
				Entries:           []*raft.Log{{Index: last2 + 1, Term: st2.Term, Type: raft.LogCommand, Data: []byte{0xff, 0xfe, 0xfd}}},
				LeaderCommitIndex: last2 + 1,
			}
			var poisonResp raft.AppendEntriesResponse
			poisonErr := atk.AppendEntries(raft.ServerID(f2.ID), raft.ServerAddress(f2.Addr), poison, &poisonResp)

			// 3. A forged RequestVote to the leader, as if from f1 in a
			// leadership transfer, 100 terms ahead.
			term := l.Node().Status().Term
			rv := &raft.RequestVoteRequest{
				RPCHeader:          header(f1.ID, f1.Addr),
				Term:               term + 100,
				LastLogIndex:       1 << 40,
				LastLogTerm:        term + 100,
				LeadershipTransfer: true,
			}
			var rvResp raft.RequestVoteResponse
			rvErr := atk.RequestVote(raft.ServerID(l.ID), raft.ServerAddress(l.Addr), rv, &rvResp)

			if !tc.tls {
				// Control: the library accepted all three.
				if aeErr != nil || !aeResp.Success {
					t.Fatalf("plaintext forged AppendEntries: %v success=%v", aeErr, aeResp.Success)
				}
				if poisonErr != nil || !poisonResp.Success {
					t.Fatalf("plaintext poisoned AppendEntries: %v success=%v", poisonErr, poisonResp.Success)
				}
				if rvErr != nil || rvResp.Term != term+100 {
					t.Fatalf("plaintext forged RequestVote: %v term %d, want %d", rvErr, rvResp.Term, term+100)
				}
				waitFor(t, "forged lock applied on "+f1.ID, func() bool {
					_, ok := f1.StateMachine().Get("forged")
					return ok
				})
				waitFor(t, "fatal apply on "+f2.ID, func() bool { return fatal.Load() > 0 || stopped(f2) })
				return
			}
			for name, err := range map[string]error{"AppendEntries": aeErr, "poison": poisonErr, "RequestVote": rvErr} {
				if err == nil {
					t.Fatalf("forged %s over plaintext to a TLS peer port succeeded", name)
				}
			}
			// Nothing changed: same leader, same term, no forged lock, no fatal
			// error, and the cluster still commits in that term.
			backendtest.RequireUnchangedAfterAttack(ctx, t, c, l, term, "forged")
			if n := fatal.Load(); n != 0 || stopped(f2) {
				t.Errorf("%s stopped after the attacks (%d fatal errors)", f2.ID, n)
			}
		})
	}
}

// TestPeerTLSHandshakeRefusals: a plaintext connection, a TLS client without
// a certificate and one with a certificate from another CA are all refused
// by a TLS peer port before any Raft message is read.
func TestPeerTLSHandshakeRefusals(t *testing.T) {
	pki := backendtest.NewPKI(t, "ticketd peer CA")
	obs, logs := observer.New(zap.WarnLevel)
	c := backendtest.NewCluster(t, newNode)
	c.Tune = func(cfg *backends.Config) { cfg.Logger = zap.New(obs) }
	backendtest.UsePeerTLS(c, pki)
	ps := c.Start(1)
	c.WaitLeader()
	addr := ps[0].Addr
	other := backendtest.NewPKI(t, "another CA")
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
	}{
		{"no_client_certificate", &tls.Config{RootCAs: pki.Pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}},
		{"certificate_from_another_ca", &tls.Config{RootCAs: pki.Pool, ServerName: "127.0.0.1", GetClientCertificate: presentAnyway(other.NodeCert(t, "mallory"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := tls.Dial("tcp", addr, tc.cfg)
			if err == nil {
				// TLS 1.3: the client finishes first; the server's
				// refusal arrives on the first read.
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				_, err = conn.Read(make([]byte, 1))
				_ = conn.Close()
			}
			if err == nil {
				t.Fatal("handshake accepted")
			}
			t.Logf("refused: %v", err)
		})
	}
	defer func() {
		// The client can see the refusal before the server has logged it:
		// wait (bounded) for the third line rather than read the count once.
		refused := func() int { return logs.FilterMessage("refused peer connection: TLS handshake failed").Len() }
		for end := time.Now().Add(5 * time.Second); refused() < 3 && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		if n := refused(); n < 3 {
			t.Errorf("%d refused handshakes logged, want 3", n)
		}
	}()
	t.Run("plaintext", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// A msgpack RequestVote header byte would do: anything not a
		// ClientHello ends the connection.
		_, _ = conn.Write(bytes.Repeat([]byte{1, 0x80}, 32))
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 64)
		n, err := conn.Read(buf)
		for err == nil {
			var m int
			m, err = conn.Read(buf[n:])
			n += m
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("plaintext connection still open after 5s")
		}
	})
}

// presentAnyway makes a TLS client present cert even though the server asks
// for certificates of another CA (Go's client would otherwise send none).
func presentAnyway(cert tls.Certificate) func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
}

// stopped reports whether p's node has stopped (a fatal apply error stops it:
// every call then fails with core.ErrStopped).
func stopped(p *backendtest.Peer) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	return errors.Is(p.Node().ReadIndex(ctx), core.ErrStopped)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(backendtest.WaitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
