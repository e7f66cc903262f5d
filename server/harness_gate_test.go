package server

import (
	"context"
	"sync"

	"github.com/ticketd/ticketd/core"
)

// grantGate makes the order of concurrent Grant proposals deterministic for
// the interaction scripts. One Kick may hand turns to several waiters at
// once (a batch of shared waiters, a semaphore's free slots;
// docs/design.md#waiting-and-fairness), and their goroutines would race to
// propose. With the gate on, each Grant waits
// at the gate; when every goroutine is blocked (settle), the harness lets
// through the one whose client sent its Acquire first, then settles again.
// The interleaving property test leaves it off: it checks invariants over
// whatever order the goroutines take.
type grantGate struct {
	mu      sync.Mutex
	on      bool
	pending []*gatedGrant
}

// gatedGrant is one Grant waiting at the gate.
type gatedGrant struct {
	cmd  core.Command
	pass chan struct{} // closed to let it through
}

// enable turns the gate on.
func (g *grantGate) enable() {
	g.mu.Lock()
	g.on = true
	g.mu.Unlock()
}

// wait blocks a Grant cmd until the gate lets it through, or ctx ends.
func (g *grantGate) wait(ctx context.Context, cmd core.Command) error {
	g.mu.Lock()
	if !g.on {
		g.mu.Unlock()
		return nil
	}
	gg := &gatedGrant{cmd: cmd, pass: make(chan struct{})}
	g.pending = append(g.pending, gg)
	g.mu.Unlock()
	select {
	case <-gg.pass:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		for i, x := range g.pending {
			if x == gg {
				g.pending = append(g.pending[:i], g.pending[i+1:]...)
				return ctx.Err()
			}
		}
		return nil // let through meanwhile
	}
}

// passFirst lets through the waiting Grant that rank orders first (lowest;
// ties by arrival) and reports whether one was waiting.
func (g *grantGate) passFirst(rank func(core.Command) int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) == 0 {
		return false
	}
	best := 0
	for i, gg := range g.pending {
		if rank(gg.cmd) < rank(g.pending[best].cmd) {
			best = i
		}
	}
	close(g.pending[best].pass)
	g.pending = append(g.pending[:best], g.pending[best+1:]...)
	return true
}

// passKey lets through the first waiting Grant of key, if any (a pipelined
// handoff's Grant that grant-first lets into the log before its Release).
func (g *grantGate) passKey(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, gg := range g.pending {
		if gg.cmd.Key == key {
			close(gg.pass)
			g.pending = append(g.pending[:i], g.pending[i+1:]...)
			return
		}
	}
}

// Propose is memraft's Propose behind the grant gate.
func (m orderedMem) Propose(ctx context.Context, cmd core.Command) (core.Result, error) {
	if cmd.Op == core.OpGrant {
		if err := m.h.gate.wait(ctx, cmd); err != nil {
			return core.Result{}, err
		}
	}
	return m.Node.Propose(ctx, cmd)
}

// sendOrder ranks a Grant by when the Acquire of its key and owner still in
// flight was sent (scripts' order); a Grant of no such call ranks last.
func (h *harness) sendOrder(cmd core.Command) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, name := range h.opOrder {
		if op := h.ops[name]; !op.done && op.kind == "acquire" && op.id.key == cmd.Key && op.owner == cmd.Owner {
			return i
		}
	}
	return len(h.opOrder)
}
