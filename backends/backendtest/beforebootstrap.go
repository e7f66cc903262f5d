package backendtest

import (
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/ticketd/ticketd/backends"
)

// errNotThisTime is what testBeforeBootstrap's hook refuses a bootstrap with.
var errNotThisTime = errors.New("backendtest: bootstrap refused by the hook")

// testBeforeBootstrap: Config.BeforeBootstrap is called once per start of
// a node whose data dir holds no Raft state (and never for one that holds
// some); an error from it stops New with that error and writes no Raft
// state, so the same data dir can then be opened as a joiner (no
// Bootstrap) with no configuration, as the server's replacement of a
// member whose data is gone does (docs/operations.md).
func testBeforeBootstrap(t *testing.T, open Factory) {
	var (
		mu     sync.Mutex
		calls  = map[string]int{}
		refuse = map[string]bool{}
	)
	c := NewCluster(t, open)
	c.Tune = func(cfg *backends.Config) {
		id := cfg.ID
		cfg.BeforeBootstrap = func() error {
			mu.Lock()
			defer mu.Unlock()
			calls[id]++
			if refuse[id] {
				return errNotThisTime
			}
			return nil
		}
	}
	peers := c.Start(3)
	c.WaitLeader()
	count := func(id string) int { mu.Lock(); defer mu.Unlock(); return calls[id] }
	for _, p := range peers {
		if got := count(p.ID); got != 1 {
			t.Fatalf("%s: BeforeBootstrap called %d times on its first start, want 1", p.ID, got)
		}
	}
	p := peers[2]
	c.Kill(p)
	c.Restart(p)
	if got := count(p.ID); got != 1 {
		t.Fatalf("%s: BeforeBootstrap called on a restart with Raft state (%d calls)", p.ID, got)
	}
	c.Kill(p)
	if err := os.RemoveAll(p.DataDir); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	refuse[p.ID] = true
	mu.Unlock()
	if err := c.Reopen(p); !errors.Is(err, errNotThisTime) {
		t.Fatalf("%s: open of a wiped data dir with a refusing BeforeBootstrap: %v, want its error", p.ID, err)
	}
	if got := count(p.ID); got != 2 {
		t.Fatalf("%s: BeforeBootstrap called %d times in all, want 2", p.ID, got)
	}
	boot := p.Boot
	p.Boot = nil // a joiner now: the refused start left no configuration behind
	defer func() { p.Boot = boot }()
	c.Restart(p)
	if ms := p.Node().Status().Members; len(ms) != 0 {
		t.Fatalf("%s: the refused bootstrap left a configuration: %+v", p.ID, ms)
	}
	c.Kill(p)
}
