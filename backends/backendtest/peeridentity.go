package backendtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
)

// PeerMessage is a kind of Raft message an attacker forges on a peer port.
type PeerMessage string

// The kinds RunPeerIdentity forges, each as the backend's wire carries it.
const (
	MsgVote       PeerMessage = "vote"        // a RequestVote far ahead in term (forced election)
	MsgAppend     PeerMessage = "append"      // entries granting the forged key to mallory
	MsgSnapshot   PeerMessage = "snapshot"    // an InstallSnapshot / MsgSnap
	MsgHeartbeat  PeerMessage = "heartbeat"   // a leader's heartbeat far ahead in term
	MsgTimeoutNow PeerMessage = "timeout-now" // leadership transfer's "start an election now"
)

// PeerMessages lists every kind RunPeerIdentity forges.
var PeerMessages = []PeerMessage{MsgVote, MsgAppend, MsgSnapshot, MsgHeartbeat, MsgTimeoutNow}

// PeerForger speaks one backend's peer protocol as an attacker holding a
// peer certificate would (the backend's test package implements it from
// the wire format alone).
type PeerForger interface {
	// Send connects to target with cfg and sends one message of kind
	// claiming to be member as, at term; an append carries a Grant of
	// forgedKey to "mallory". It returns nil when target accepted the
	// message (answered or delivered it), and an error when it refused it
	// (the handshake, a refusal status, the connection closed unanswered).
	Send(t *testing.T, cfg *tls.Config, target *Peer, as string, kind PeerMessage, term uint64, forgedKey string) error
	// Open connects to target with cfg as member as and has one harmless
	// message accepted (a vote request for a past term, or a message
	// stream opened), leaving the connection or stream open.
	Open(t *testing.T, cfg *tls.Config, target *Peer, as string) (PeerConn, error)
}

// PeerConn is a connection or stream a PeerForger opened.
type PeerConn interface {
	// WaitClosed returns nil once target has closed it, an error when it
	// is still open after timeout.
	WaitClosed(timeout time.Duration) error
	Close()
}

// RunPeerIdentity checks that, over mutual TLS, peer identity is membership
// (docs/security.md#peer-identity-is-membership): on a three-node cluster, a
// certificate the cluster's CA signed for an id no member has (n9) is refused
// for every PeerMessage on every node; a node added with AddVoter talks at
// once (it joins and catches up); once it is removed, its certificate is
// refused for every PeerMessage too, and a connection opened under it while it
// was a member is closed by every node. Term, leader and lock table are then
// unchanged (RequireUnchangedAfterAttack). Peer idle timeouts are raised so
// that only the removal can close that connection.
func RunPeerIdentity(t *testing.T, open Factory, forge PeerForger) {
	ctx := testContext(t)
	pki := NewPKI(t, "ticketd peer CA")
	c := NewCluster(t, open)
	c.Tune = func(cfg *backends.Config) { cfg.PeerIdleTimeout = time.Hour }
	UsePeerTLS(c, pki)
	c.Start(3)
	l := c.WaitLeader()
	if _, err := l.Node().Propose(ctx, core.Grant("real", 60_000, "alice")); err != nil {
		t.Fatalf("grant: %v", err)
	}
	c.WaitApplied(l.StateMachine().AppliedIndex())
	members := c.Live()
	const forgedKey = "real-forged"

	// The harmless message is accepted from a member's certificate: the
	// forger speaks the protocol.
	if conn, err := forge.Open(t, pki.PeerTLS(t, l.ID), members[1], l.ID); err != nil {
		t.Fatalf("stale vote request under the leader's own certificate refused: %v", err)
	} else {
		conn.Close()
	}

	refusedEverywhere := func(who string, cfg *tls.Config, term uint64) {
		t.Helper()
		for _, p := range members {
			for _, kind := range PeerMessages {
				if err := forge.Send(t, cfg, p, who, kind, term+10, forgedKey); err == nil {
					t.Errorf("%s accepted a %s from %s's certificate", p.ID, kind, who)
				}
			}
		}
	}

	term := l.Node().Status().Term
	t.Run("certificate_of_no_member", func(t *testing.T) {
		refusedEverywhere("n9", pki.PeerTLS(t, "n9"), term)
	})
	RequireUnchangedAfterAttack(ctx, t, c, l, term, forgedKey)

	// A member added with AddVoter talks as soon as the change applies.
	joiner := c.Join()
	if err := c.OnLeader(ctx, func(ctx context.Context, n Node) error { return n.AddVoter(ctx, joiner.Member()) }); err != nil {
		t.Fatalf("add voter %s: %v", joiner.ID, err)
	}
	l = c.WaitLeader()
	if _, err := l.Node().Propose(ctx, core.Grant("after-join", 60_000, "alice")); err != nil {
		t.Fatalf("grant with %s: %v", joiner.ID, err)
	}
	c.WaitApplied(l.StateMachine().AppliedIndex())
	removedCert := pki.PeerTLS(t, joiner.ID) // the CA's certificate for it, as its own
	var conns []PeerConn
	for _, p := range members {
		conn, err := forge.Open(t, removedCert, p, joiner.ID)
		if err != nil {
			t.Fatalf("%s refused member %s: %v", p.ID, joiner.ID, err)
		}
		t.Cleanup(conn.Close)
		conns = append(conns, conn)
	}

	if err := c.OnLeader(ctx, func(ctx context.Context, n Node) error { return n.RemoveServer(ctx, joiner.ID) }); err != nil {
		t.Fatalf("remove server %s: %v", joiner.ID, err)
	}
	c.Kill(joiner)
	l = c.WaitLeader(members...)
	c.WaitApplied(l.StateMachine().AppliedIndex(), members...)
	t.Run("removed_member_connections_closed", func(t *testing.T) {
		for i, conn := range conns {
			if err := conn.WaitClosed(WaitTimeout); err != nil {
				t.Errorf("%s kept %s's connection open after its removal: %v", members[i].ID, joiner.ID, err)
			}
		}
	})
	term = l.Node().Status().Term
	t.Run("removed_member_certificate", func(t *testing.T) {
		refusedEverywhere(joiner.ID, removedCert, term)
	})
	RequireUnchangedAfterAttack(ctx, t, c, l, term, forgedKey)
}

// ForgedSnapshot returns a core snapshot at index whose lock table holds
// forgedKey granted to "mallory": what a forged InstallSnapshot carries.
func ForgedSnapshot(t testing.TB, forgedKey string, index uint64) []byte {
	t.Helper()
	payload, err := core.Encode(core.Grant(forgedKey, 60_000, "mallory"))
	if err != nil {
		t.Fatal(err)
	}
	sm := core.NewStateMachine()
	if _, _, err := sm.ApplyEntry(index, payload); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := sm.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// RunDialIdentity checks that peer identity is membership in the other
// direction too (docs/security.md#peer-identity-is-membership): a node
// dialling a member's raft address accepts the server's certificate only when
// it names that member. On a three-node cluster with one follower down, its
// address is answered by an impostor holding a certificate of the cluster's
// CA, first for an id no member has (n9), then the other follower's own
// certificate; every handshake the live nodes make to it must be refused by
// them (the impostor never sees a completed handshake, so no vote, append or
// acknowledgement crosses it), and the cluster keeps committing.
func RunDialIdentity(t *testing.T, open Factory) {
	ctx := testContext(t)
	pki := NewPKI(t, "ticketd peer CA")
	c := NewCluster(t, open)
	UsePeerTLS(c, pki)
	c.Start(3)
	l := c.WaitLeader()
	fs := c.Followers(l)
	down, other := fs[0], fs[1]
	c.Kill(down)

	for _, as := range []string{"n9", other.ID} {
		t.Run("certificate_of_"+as, func(t *testing.T) {
			imp := listenImpostor(t, down.Addr, pki.PeerTLS(t, as))
			if _, err := c.Propose(ctx, core.Grant("dial-"+as, 60_000, "alice")); err != nil {
				t.Fatalf("grant with %s down: %v", down.ID, err)
			}
			if !poll(WaitTimeout, func() bool { return imp.refused.Load() >= 3 || imp.completed.Load() > 0 }) {
				t.Fatalf("no node dialled %s's address %s within %v", down.ID, down.Addr, WaitTimeout)
			}
			if n := imp.completed.Load(); n > 0 {
				t.Fatalf("a node completed %d handshakes with %q's certificate at %s's address %s", n, as, down.ID, down.Addr)
			}
		})
	}
}

// impostor is a TLS listener that counts the handshakes dialled to it:
// completed (the dialler accepted its certificate) or refused.
type impostor struct {
	completed, refused atomic.Int64
}

// listenImpostor serves TLS with cfg (its certificate as the server's,
// offering h2 as the etcd transport asks) on addr until the test ends.
func listenImpostor(t *testing.T, addr string, cfg *tls.Config) *impostor {
	t.Helper()
	srv := cfg.Clone()
	srv.NextProtos = []string{"h2"}
	var ln net.Listener
	if !poll(WaitTimeout, func() bool {
		var err error
		ln, err = tls.Listen("tcp", addr, srv)
		return err == nil
	}) {
		t.Fatalf("listen on %s: still in use after %v", addr, WaitTimeout)
	}
	imp := &impostor{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(WaitTimeout))
				if err := conn.(*tls.Conn).Handshake(); err != nil {
					imp.refused.Add(1)
					return
				}
				imp.completed.Add(1)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	return imp
}
