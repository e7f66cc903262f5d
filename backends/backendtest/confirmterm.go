package backendtest

import (
	"context"
	"testing"
)

// testConfirmTerm: ConfirmTerm on the leader returns the term it leads in
// (Status().Term) after its writes are applied; on a follower it fails with a
// not-leader error naming the leader; after a failover the new leader
// confirms a later term, and the deposed leader, partitioned away, confirms
// nothing (ctx runs out or it learns it is no longer leader).
func testConfirmTerm(t *testing.T, open Factory) {
	ctx := testContext(t)
	c := NewCluster(t, open)
	c.Start(3)
	l := c.WaitLeader()
	term := confirmOnLeader(ctx, t, l)
	f := follower(c, l)
	_, err := f.Node().ConfirmTerm(ctx)
	requireNotLeader(t, err, l)

	c.Partition(l)
	nl := c.WaitNewLeader(l)
	term2, err := nl.Node().ConfirmTerm(ctx)
	if err != nil {
		t.Fatalf("new leader ConfirmTerm: %v", err)
	}
	if term2 <= term {
		t.Fatalf("new leader confirmed term %d, not after the old leader's %d", term2, term)
	}
	shortCtx, cancel := context.WithTimeout(ctx, 3*ElectionTimeout)
	defer cancel()
	if got, err := l.Node().ConfirmTerm(shortCtx); err == nil {
		t.Fatalf("partitioned old leader confirmed term %d", got)
	}
	c.Heal()
}

// confirmOnLeader checks the leader half of confirm_term on l and returns the
// term confirmed: after a write, ConfirmTerm returns the term l leads in
// (Status().Term, the term of its last leader event) with the write applied.
func confirmOnLeader(ctx context.Context, t *testing.T, l *Peer) uint64 {
	t.Helper()
	tok := mustGrant(ctx, t, l.Node(), "confirm-me")
	term, err := l.Node().ConfirmTerm(ctx)
	if err != nil {
		t.Fatalf("leader ConfirmTerm: %v", err)
	}
	if st := l.Node().Status(); term == 0 || term != st.Term {
		t.Fatalf("ConfirmTerm = %d, status term %d", term, st.Term)
	}
	if ev, ok := l.Leaders().Last(); !ok || !ev.Event.IsLeader || ev.Event.Term != term {
		t.Fatalf("ConfirmTerm = %d, last leader event %+v", term, ev.Event)
	}
	if lk, ok := l.StateMachine().Get("confirm-me"); !ok || lk.Token != tok {
		t.Fatalf("after ConfirmTerm: lock %+v held=%v, want token %d", lk, ok, tok)
	}
	return term
}
