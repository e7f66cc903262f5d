package etcd_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/core"
)

// The wire format of the etcd backend's peer transport, as a stranger who
// read the package documentation would speak it (the internal package is
// not importable from here, which is the point: the attacker has only the
// protocol).
const (
	messagesPath   = "/raft/v1/messages"
	headerTo       = "Ticketd-Raft-To"
	headerFromID   = "Ticketd-Raft-From-Id"
	headerFromAddr = "Ticketd-Raft-From-Addr"
)

// nodeID is the raft id the backend derives from a member id (FNV-64a).
func nodeID(id string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return h.Sum64()
}

// forge POSTs msgs to the peer port addr over plaintext h2c, claiming to be
// member fromID at fromAddr; it returns the HTTP status or the error.
func forge(t *testing.T, addr, to, fromID, fromAddr string, msgs ...*pb.Message) (int, error) {
	t.Helper()
	return forgeWith(t, nil, addr, to, fromID, fromAddr, msgs...)
}

// forgeWith is forge over HTTP/2 on TLS with cfg when cfg is not nil (an
// attacker holding a peer certificate), over h2c when it is nil.
func forgeWith(t *testing.T, cfg *tls.Config, addr, to, fromID, fromAddr string, msgs ...*pb.Message) (int, error) {
	t.Helper()
	var body []byte
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		body = protowire.AppendVarint(body, uint64(len(b)))
		body = append(body, b...)
	}
	var protocols http.Protocols
	scheme := "http://"
	if cfg == nil {
		protocols.SetUnencryptedHTTP2(true)
	} else {
		protocols.SetHTTP2(true)
		scheme = "https://"
	}
	rt := &http.Transport{Protocols: &protocols, TLSClientConfig: cfg}
	defer rt.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+addr+messagesPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(headerTo, strconv.FormatUint(nodeID(to), 10))
	req.Header.Set(headerFromID, fromID)
	req.Header.Set(headerFromAddr, fromAddr)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func entryData(t *testing.T, cmd core.Command) []byte {
	t.Helper()
	payload, err := core.Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 9, 9+len(payload))
	out[0] = 1 // envelope version
	binary.BigEndian.PutUint64(out[1:], 1<<63)
	return append(out, payload...)
}

func stoppedNode(p *backendtest.Peer) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	return errors.Is(p.Node().ReadIndex(ctx), core.ErrStopped)
}

// TestForgedPeerMessages replays forged-peer attacks on the etcd backend from
// a process without the peer certificate: a forged MsgApp carrying a lock
// and one carrying an undecodable entry to followers, and a forged
// MsgHeartbeatResp 100 terms ahead to the leader (term jump, forced
// election). With PeerTLS each is refused at the handshake and nothing
// changes; without it (the control) each reaches raft and does its harm.
func TestForgedPeerMessages(t *testing.T) {
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
			c.Tune = func(cfg *backends.Config) { cfg.OnFatal = func(error) { fatal.Add(1) } }
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
			var fs []*backendtest.Peer
			for _, p := range c.Live() {
				if p != l {
					fs = append(fs, p)
				}
			}
			f1, f2 := fs[0], fs[1]
			term := l.Node().Status().Term

			app := func(f *backendtest.Peer, data []byte) *pb.Message {
				last := f.StateMachine().AppliedIndex()
				return &pb.Message{
					Type: pb.MessageType_MsgApp.Enum(), From: new(nodeID(l.ID)), To: new(nodeID(f.ID)),
					Term: new(term), LogTerm: new(term), Index: new(last), Commit: new(last + 1),
					Entries: []*pb.Entry{{Type: pb.EntryType_EntryNormal.Enum(), Term: new(term), Index: new(last + 1), Data: data}},
				}
			}
			_, lockErr := forge(t, f1.Addr, f1.ID, l.ID, l.Addr, app(f1, entryData(t, core.Grant("forged", 60_000, "mallory"))))
			_, poisonErr := forge(t, f2.Addr, f2.ID, l.ID, l.Addr, app(f2, []byte{0xff, 0xfe, 0xfd}))
			jump := &pb.Message{
				Type: pb.MessageType_MsgHeartbeatResp.Enum(), From: new(nodeID(f1.ID)), To: new(nodeID(l.ID)), Term: new(term + 100),
			}
			_, jumpErr := forge(t, l.Addr, l.ID, f1.ID, f1.Addr, jump)

			if !tc.tls {
				for name, err := range map[string]error{"lock": lockErr, "poison": poisonErr, "term jump": jumpErr} {
					if err != nil {
						t.Fatalf("plaintext forged %s: %v", name, err)
					}
				}
				waitUntil(t, "forged lock applied on "+f1.ID, func() bool {
					_, ok := f1.StateMachine().Get("forged")
					return ok
				})
				waitUntil(t, "fatal apply on "+f2.ID, func() bool { return fatal.Load() > 0 || stoppedNode(f2) })
				waitUntil(t, "term jump on "+l.ID, func() bool { return l.Node().Status().Term >= term+100 })
				return
			}
			for name, err := range map[string]error{"lock": lockErr, "poison": poisonErr, "term jump": jumpErr} {
				if err == nil {
					t.Fatalf("forged %s over plaintext to a TLS peer port was accepted", name)
				}
			}
			// Nothing changed: same leader, same term, no forged lock, no fatal
			// error, and the cluster still commits in that term.
			backendtest.RequireUnchangedAfterAttack(ctx, t, c, l, term, "forged")
			if n := fatal.Load(); n != 0 || stoppedNode(f2) {
				t.Errorf("%s stopped after the attacks (%d fatal errors)", f2.ID, n)
			}
		})
	}
}

// TestForgedSenderAddressIsIgnored: on a plaintext cluster (the worst case),
// a batch whose headers claim to come from a follower at the attacker's
// address does not re-route the leader's stream to that follower: the
// attacker receives nothing and the follower keeps applying. Addresses come
// only from replicated membership (a peer announcing another's address
// would hijack its traffic; the address book refuses it, not TLS).
func TestForgedSenderAddressIsIgnored(t *testing.T) {
	var hits atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var h2c http.Protocols
	h2c.SetHTTP1(true)
	h2c.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &h2c, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	c := backendtest.NewCluster(t, newNode)
	c.Start(3)
	l := c.WaitLeader()
	ctx := t.Context()
	var f *backendtest.Peer
	for _, p := range c.Live() {
		if p != l {
			f = p
			break
		}
	}
	term := l.Node().Status().Term
	hb := &pb.Message{
		Type: pb.MessageType_MsgHeartbeatResp.Enum(), From: new(nodeID(f.ID)), To: new(nodeID(l.ID)), Term: new(term),
	}
	if status, err := forge(t, l.Addr, l.ID, f.ID, ln.Addr().String(), hb); err != nil || status != http.StatusNoContent {
		t.Fatalf("forged batch on a plaintext cluster: %d, %v (want it delivered: only the address must be ignored)", status, err)
	}
	// The leader's open stream to f survives an address change; it redials
	// (to whatever address it holds for f) when the stream breaks, as it
	// does when f restarts.
	c.Kill(f)
	c.Restart(f)
	for i := 0; i < 20; i++ {
		if _, err := l.Node().Propose(ctx, core.Grant("k"+strconv.Itoa(i), 60_000, "o")); err != nil {
			t.Fatalf("grant: %v", err)
		}
	}
	c.WaitApplied(l.StateMachine().AppliedIndex(), f)
	if n := hits.Load(); n != 0 {
		t.Fatalf("the leader sent %d requests to the address a forged header named", n)
	}
	for _, m := range l.Node().Status().Members {
		if m.ID == f.ID && m.RaftAddr != f.Addr {
			t.Fatalf("leader's membership names %s at %s, want %s", f.ID, m.RaftAddr, f.Addr)
		}
	}
}

// TestForgedSenderCannotRouteAJoinersReplies: a joining node (in no
// configuration yet) that receives batches whose headers claim to come from
// the leader, or from a member it does not know, at the attacker's address,
// sent by a peer holding the leader's certificate (or anyone, on plaintext
// loopback), never dials that address: it learns addresses only from the
// members its join answer listed (backends.PeerLearner) and from replicated
// membership, and it still joins and catches up. Over TLS, a certificate
// naming no member it joins through is refused outright.
func TestForgedSenderCannotRouteAJoinersReplies(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  bool
	}{
		{"valid_peer_certificate", true},
		{"plaintext_loopback", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The attacker's address: any connection to it is a redirected reply.
			var dialled atomic.Int32
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ln.Close() })
			go func() {
				for {
					conn, err := ln.Accept()
					if err != nil {
						return
					}
					dialled.Add(1)
					_ = conn.Close()
				}
			}()

			c := backendtest.NewCluster(t, newNode)
			var pki *backendtest.PKI
			if tc.tls {
				pki = backendtest.NewPKI(t, "ticketd peer CA")
				backendtest.UsePeerTLS(c, pki)
			}
			c.Start(3)
			l := c.WaitLeader()
			ctx := t.Context()
			if _, err := l.Node().Propose(ctx, core.Grant("before", 60_000, "alice")); err != nil {
				t.Fatalf("grant: %v", err)
			}
			j := c.Join()
			term := l.Node().Status().Term
			var atk *tls.Config
			claims := []string{l.ID, "n9"}
			if tc.tls {
				atk = pki.PeerTLS(t, l.ID)
				claims = claims[:1] // its certificate binds it to l.ID
				hb := &pb.Message{Type: pb.MessageType_MsgHeartbeat.Enum(), From: new(nodeID("n9")), To: new(nodeID(j.ID)), Term: new(term)}
				if status, err := forgeWith(t, pki.PeerTLS(t, "n9"), j.Addr, j.ID, "n9", ln.Addr().String(), hb); err == nil {
					t.Fatalf("batch under a certificate naming no member %s joins through: %d, want refused", j.ID, status)
				}
			}
			for _, claimed := range claims {
				hb := &pb.Message{
					Type: pb.MessageType_MsgHeartbeat.Enum(), From: new(nodeID(claimed)), To: new(nodeID(j.ID)), Term: new(term),
				}
				status, err := forgeWith(t, atk, j.Addr, j.ID, claimed, ln.Addr().String(), hb)
				if err != nil || status != http.StatusNoContent {
					t.Fatalf("forged batch claiming %s: %d, %v (want it delivered: only the address must be ignored)", claimed, status, err)
				}
			}
			if err := l.Node().AddVoter(ctx, j.Member()); err != nil {
				t.Fatalf("add %s: %v", j.ID, err)
			}
			for i := 0; i < 10; i++ {
				if _, err := l.Node().Propose(ctx, core.Grant("k"+strconv.Itoa(i), 60_000, "o")); err != nil {
					t.Fatalf("grant: %v", err)
				}
			}
			c.WaitApplied(l.StateMachine().AppliedIndex(), j)
			if n := dialled.Load(); n != 0 {
				t.Fatalf("the joining node dialled the address a forged header named %d times", n)
			}
		})
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(backendtest.WaitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
