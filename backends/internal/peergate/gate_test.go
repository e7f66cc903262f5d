package peergate_test

import (
	"errors"
	"testing"

	"github.com/ticketd/ticketd/backends/internal/peergate"
	"github.com/ticketd/ticketd/core"
)

// TestCheckFollowsTheConfiguration: before the configuration is known no
// one is accepted; with an empty configuration only the learned (bootstrap
// or join) members; with a configuration exactly its members, learned
// ones no longer count; Refresh closes what a change removed, once.
func TestCheckFollowsTheConfiguration(t *testing.T) {
	var ids []string
	known := false
	g := peergate.New(func() ([]string, bool) { return ids, known }, nil, nil)
	refused := func(cn string) bool { return errors.Is(g.Check(cn), peergate.ErrNotMember) }

	if !refused("n1") {
		t.Fatal("accepted n1 before the configuration was known")
	}
	known = true
	g.Learn([]core.Member{{ID: "n1"}, {ID: "n2"}})
	if refused("n1") || !refused("n9") {
		t.Fatal("empty configuration: want the learned n1 accepted and n9 refused")
	}
	ids = []string{"n2", "n3"}
	if !refused("n1") || refused("n3") {
		t.Fatal("configuration {n2,n3}: want n1 refused and n3 accepted")
	}

	closed := map[string]int{}
	untrack := g.Track("n3", "a", func() { closed["n3"]++ })
	g.Track("n2", "b", func() { closed["n2"]++ })
	untrack()
	ids = []string{"n3"}
	g.Refresh()
	g.Refresh()
	if closed["n2"] != 1 || closed["n3"] != 0 {
		t.Fatalf("after removing n2: closed %v, want n2 once and n3 (untracked) never", closed)
	}
}
