package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Network fault kinds: they need a Target that also meets
// NetTarget (hosts, one network namespace per node: faults/hosts). Over
// such a target the kinds that cut links (IsolateLeader,
// OneWayFromLeader, OneWayToLeader, PartitionHalves) are blackhole routes
// between node namespaces: one-way loss at the IP level, and a leader cut
// from its peers while its clients, in a namespace of their own, still
// reach it (Consul #54, Jepsen's 2014 stale reads).
const (
	// LinkDown: set a random node's link down for Duration: it reaches no
	// one and no one, clients included, reaches it (a pulled cable).
	LinkDown Kind = "link-down"
	// LinkDownLeader: set the leader's link down for Duration.
	LinkDownLeader Kind = "link-down-leader"
	// FlapLink: a random node's link goes down and up again and again
	// (each phase about half an election timeout, at random) for Duration.
	FlapLink Kind = "flap-link"
	// MoveNode: kill -9 a random node and restart it on a new address; it
	// rejoins through membership (AddMember with its id and new addresses).
	MoveNode Kind = "move-node"
)

// NetKinds lists the network fault kinds; a schedule for a NetTarget
// takes append(Kinds, NetKinds...).
var NetKinds = []Kind{LinkDown, LinkDownLeader, FlapLink, MoveNode}

// NetTarget is a Target whose nodes are hosts on a real network; the
// Executor finds it by type assertion (an optional capability, like
// hashicorp/raft's WithPreVote). Its methods are called from the
// Executor's goroutine, except LinkDown and LinkUp, which a flapping link
// calls from one goroutine of its own.
type NetTarget interface {
	Target
	// LinkDown cuts node i's link (both directions, clients included);
	// LinkUp restores it.
	LinkDown(i int) error
	LinkUp(i int) error
	// Move kills node i, gives it a new address, starts it again with the
	// same id and data, and updates its membership; it returns once the
	// leader lists the new address, or ctx ends.
	Move(ctx context.Context, i int) error
}

// netState is the Executor's record of the network faults in effect.
type netState struct {
	down map[int]bool
	flap map[int]func() // stops node i's flapping (and leaves the link up)
}

// injectNet starts a network fault; handled is false for a kind it does not know.
func (e *Executor) injectNet(ctx context.Context, f Fault) (heal func(context.Context) error, nodes []int, handled bool, err error) {
	switch f.Kind {
	case LinkDown, LinkDownLeader, FlapLink, MoveNode:
	default:
		return nil, nil, false, nil
	}
	nt, isNet := e.target.(NetTarget)
	if !isNet {
		return nil, nil, true, fmt.Errorf("%w: %s", ErrNotNetwork, f.Kind)
	}
	if e.net.down == nil {
		e.net.down, e.net.flap = map[int]bool{}, map[int]func(){}
	}
	i := pick(e.others(-1), f.Pick)
	if f.Kind == LinkDownLeader {
		if i, err = e.leader(ctx); err != nil {
			return nil, nil, true, err
		}
	}
	switch f.Kind {
	case LinkDown, LinkDownLeader:
		e.net.down[i] = true
		if err := nt.LinkDown(i); err != nil {
			return nil, []int{i}, true, err
		}
		return func(context.Context) error { return e.linkUp(nt, i) }, []int{i}, true, nil
	case FlapLink:
		e.net.flap[i] = flap(nt, i, f.Pick)
		return func(context.Context) error { return e.linkUp(nt, i) }, []int{i}, true, nil
	default: // MoveNode
		if e.killed[i] || e.paused[i] {
			return nil, []int{i}, true, fmt.Errorf("nemesis: node %d is down; not moved", i)
		}
		// Not cut short by the run's end: a node restarted on a new
		// address that membership never learns is cut off for good, and
		// the heal after the run could not bring it back.
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*leaderWait)
		defer cancel()
		if err := nt.Move(mctx, i); err != nil {
			// The node may run on its new address while membership still
			// names the old one (no leader answered the AddMember): it
			// stays cut off until it is added at its current
			// address, which HealAll does for a removed node.
			e.removed[i] = true
			return nil, []int{i}, true, err
		}
		return nil, []int{i}, true, nil
	}
}

// flap toggles node i's link down and up every 100–350ms (seeded by pick)
// until the returned function is called; it returns with the link up.
func flap(nt NetTarget, i, pick int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		period := time.Duration(100+pick%250) * time.Millisecond
		up := true
		for {
			select {
			case <-done:
				return
			case <-time.After(period):
			}
			if up {
				_ = nt.LinkDown(i)
			} else {
				_ = nt.LinkUp(i)
			}
			up = !up
		}
	}()
	return func() { close(done); wg.Wait() }
}

// linkUp stops node i's flapping, if any, and sets its link up.
func (e *Executor) linkUp(nt NetTarget, i int) error {
	if stop := e.net.flap[i]; stop != nil {
		stop()
		delete(e.net.flap, i)
	}
	if err := nt.LinkUp(i); err != nil {
		return err
	}
	delete(e.net.down, i)
	return nil
}

// healNet undoes every network fault still in effect (HealAll).
func (e *Executor) healNet() error {
	nt, ok := e.target.(NetTarget)
	if !ok {
		return nil
	}
	var errs []error
	for i := range e.net.flap {
		errs = append(errs, e.linkUp(nt, i))
	}
	for i := range e.net.down {
		errs = append(errs, e.linkUp(nt, i))
	}
	return errors.Join(errs...)
}
