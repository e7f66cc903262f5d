package etcd_test

import (
	"net/http"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/ticketd/ticketd/backends/backendtest"
)

// TestPeerCertificateBindsSender: over mutual TLS every message's From
// must be the raft id of the member the peer certificate names. A valid
// node certificate for the leader sending a heartbeat "from" another member
// at a much higher term (forcing a leader change) is refused
// (403) and the term does not move; the same certificate sending as its own
// member is delivered. A certificate that names no member (one shared by
// all nodes) is refused whatever it claims.
func TestPeerCertificateBindsSender(t *testing.T) {
	pki := backendtest.NewPKI(t, "ticketd peer CA")
	c := backendtest.NewCluster(t, newNode)
	backendtest.UsePeerTLS(c, pki)
	c.Start(3)
	l := c.WaitLeader()
	term := l.Node().Status().Term
	fs := c.Followers(l)
	f, other := fs[0], fs[1]
	atk := pki.PeerTLS(t, l.ID) // a real node certificate, for the leader's id
	forged := &pb.Message{Type: pb.MessageType_MsgHeartbeat.Enum(), From: new(nodeID(other.ID)), To: new(nodeID(f.ID)), Term: new(term + 10)}
	if status, err := forgeWith(t, atk, f.Addr, f.ID, other.ID, other.Addr, forged); err != nil || status != http.StatusForbidden {
		t.Fatalf("message from %s under %s's certificate: %d, %v; want 403", other.ID, l.ID, status, err)
	}
	own := &pb.Message{Type: pb.MessageType_MsgHeartbeat.Enum(), From: new(nodeID(l.ID)), To: new(nodeID(f.ID)), Term: new(term)}
	if status, err := forgeWith(t, atk, f.Addr, f.ID, l.ID, l.Addr, own); err != nil || status != http.StatusNoContent {
		t.Fatalf("message from %s under its own certificate: %d, %v; want 204", l.ID, status, err)
	}
	shared := pki.PeerTLS(t, "node")
	if status, err := forgeWith(t, shared, f.Addr, f.ID, l.ID, l.Addr, own); err == nil {
		t.Fatalf("message from %s under a certificate naming no member: %d; want refused", l.ID, status)
	}
	if got := f.Node().Status().Term; got != term {
		t.Errorf("follower's term moved from %d to %d", term, got)
	}
}
