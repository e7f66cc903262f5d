package backendtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/ticketd/ticketd/backends"
)

// UsePeerTLS makes every node c opens from now on use mutual TLS between
// peers (backends.Config.PeerTLS) with a certificate signed by pki, named
// after the node id. An earlier Tune still runs, after it.
func UsePeerTLS(c *Cluster, pki *PKI) {
	prev := c.Tune
	c.Tune = func(cfg *backends.Config) {
		cfg.PeerTLS = pki.PeerTLS(c.t, cfg.ID)
		if prev != nil {
			prev(cfg)
		}
	}
}

// RunPeerTLS checks a backend with backends.Config.PeerTLS set: a three-node
// cluster on mutual TLS commits, fails over when its leader is killed, and
// takes the old leader back; a fourth node whose certificate comes from
// another CA, added as a voter, never receives an entry (its handshakes are
// refused both ways) while the others go on committing; a node with a
// certificate of the right CA then joins and catches up.
func RunPeerTLS(t *testing.T, open Factory) {
	ctx := testContext(t)
	pki := NewPKI(t, "ticketd peer CA")
	c := NewCluster(t, open)
	UsePeerTLS(c, pki)
	c.Start(3)
	l := c.WaitLeader()
	for i := 0; i < 10; i++ {
		mustGrant(ctx, t, l.Node(), fmt.Sprintf("tls-%d", i))
	}
	c.WaitApplied(l.StateMachine().AppliedIndex())

	c.Kill(l)
	nl := c.WaitNewLeader(l)
	for i := 10; i < 20; i++ {
		mustGrant(ctx, t, nl.Node(), fmt.Sprintf("tls-%d", i))
	}
	c.Restart(l)
	c.WaitApplied(nl.StateMachine().AppliedIndex())
	c.EnsureSame()

	// A stranger with a certificate from another CA, let into the
	// configuration by an administrator's mistake: no entry reaches it.
	other := NewPKI(t, "another CA")
	ours := c.Tune
	c.Tune = func(cfg *backends.Config) { cfg.PeerTLS = other.PeerTLS(t, cfg.ID) }
	stranger := c.Join()
	c.Tune = ours
	if err := c.OnLeader(ctx, func(ctx context.Context, n Node) error { return n.AddVoter(ctx, stranger.Member()) }); err != nil {
		t.Fatalf("add voter %s: %v", stranger.ID, err)
	}
	var last uint64
	for i := 20; i < 30; i++ {
		res, err := c.Propose(ctx, grant(fmt.Sprintf("tls-%d", i)))
		if err != nil {
			t.Fatalf("grant with a stranger in the configuration: %v", err)
		}
		last = res.Token
	}
	members := []*Peer{c.Peer("n1"), c.Peer("n2"), c.Peer("n3")}
	leader := c.WaitLeader(members...)
	c.WaitApplied(leader.StateMachine().AppliedIndex(), members...)
	if got := stranger.StateMachine().AppliedIndex(); got != 0 {
		t.Fatalf("node with a foreign CA applied index %d, want 0 (last token %d)", got, last)
	}
	if got := stranger.StateMachine().LastToken(); got != 0 {
		t.Fatalf("node with a foreign CA has last token %d, want 0", got)
	}
	if err := c.OnLeader(ctx, func(ctx context.Context, n Node) error { return n.RemoveServer(ctx, stranger.ID) }); err != nil {
		t.Fatalf("remove server %s: %v", stranger.ID, err)
	}
	c.Kill(stranger)

	// A node with a certificate of the right CA joins over mutual TLS and
	// catches up.
	joiner := c.Join()
	if err := c.OnLeader(ctx, func(ctx context.Context, n Node) error { return n.AddVoter(ctx, joiner.Member()) }); err != nil {
		t.Fatalf("add voter %s: %v", joiner.ID, err)
	}
	leader = c.WaitLeader()
	mustGrant(ctx, t, leader.Node(), "after-join")
	c.WaitApplied(leader.StateMachine().AppliedIndex())
	c.EnsureSame()
}
