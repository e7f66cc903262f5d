package backendtest

import (
	"context"
	"testing"

	"github.com/ticketd/ticketd/core"
)

// RequireUnchangedAfterAttack checks what a refused peer-level attack (forged
// RequestVote/AppendEntries/undecodable entries from a stranger,
// docs/security.md#peer-identity-is-membership)
// must leave behind on c: the cluster still commits through leader l, every
// live peer is still in term and follows l, none holds the forged key, and
// all peers agree (EnsureSame). Stopped nodes are the caller's to check, since
// how a backend reports a fatal stop is its own. Fails t otherwise.
func RequireUnchangedAfterAttack(ctx context.Context, t *testing.T, c *Cluster, l *Peer, term uint64, forgedKey string) {
	t.Helper()
	if _, err := l.Node().Propose(ctx, core.Grant("after", 60_000, "bob")); err != nil {
		t.Fatalf("grant after the attacks: %v", err)
	}
	c.WaitApplied(l.StateMachine().AppliedIndex())
	for _, p := range c.Live() {
		if got := p.Node().Status().Term; got != term {
			t.Errorf("%s term %d after the attacks, want %d", p.ID, got, term)
		}
		if m, _ := p.Node().Leader(); m.ID != l.ID {
			t.Errorf("%s follows %q after the attacks, want %s", p.ID, m.ID, l.ID)
		}
		if _, ok := p.StateMachine().Get(forgedKey); ok {
			t.Errorf("%s holds the forged lock", p.ID)
		}
	}
	c.EnsureSame()
}
