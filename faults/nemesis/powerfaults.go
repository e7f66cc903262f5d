package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"time"
)

// PowerCut (docs/faults.md#power-loss): kill -9 every node at once, drop
// every write the nodes had not made durable (data written since the last
// fsync, fdatasync or msync of its file; names created, renamed or removed
// since the last fsync of their directory), then start them all, as after
// a power cut of the whole cluster. Instantaneous, like RestartAll; it needs
// a PowerTarget.
const PowerCut Kind = "power-cut"

// PowerKinds lists the power-loss fault kinds.
var PowerKinds = []Kind{PowerCut}

// ErrNotPower: a power-loss fault (PowerKinds) was scheduled for a Target
// that is not a PowerTarget; it was skipped.
var ErrNotPower = errors.New("nemesis: target has no power-loss faults")

// PowerTarget is a Target whose nodes keep their data dirs on a file system
// that holds unsynced writes apart (faults/powerfs); found by type
// assertion, like DiskTarget.
type PowerTarget interface {
	Target
	// CutPower drops every write not yet durable on the nodes' file
	// system. Every node has been killed (Kill) before the call and is
	// started (Start) after it.
	CutPower() error
}

// PowerSchedule returns the schedule of a power-loss run of seed over
// length: one PowerCut in each slot of about 4 s (at least one), at a
// random moment of the middle half of its slot, so that the cluster serves
// before and after each cut. The same seed and length give the same
// Schedule.
func PowerSchedule(seed int64, length time.Duration) Schedule {
	rng := rand.New(rand.NewSource(seed))
	n := max(1, int(length/(4*time.Second)))
	slot := length / time.Duration(n)
	s := Schedule{Seed: seed}
	for k := range n {
		at := time.Duration(k)*slot + between(rng, slot/4, slot*3/4)
		s.Faults = append(s.Faults, Fault{At: at, Kind: PowerCut, Pick: rng.Intn(1 << 20)})
	}
	return s
}

// injectPower carries out a power-loss fault; handled is false for a kind
// it does not know.
func (e *Executor) injectPower(f Fault) (heal func(context.Context) error, nodes []int, handled bool, err error) {
	if f.Kind != PowerCut {
		return nil, nil, false, nil
	}
	pt, ok := e.target.(PowerTarget)
	if !ok {
		return nil, nil, true, fmt.Errorf("%w: %s", ErrNotPower, f.Kind)
	}
	all := e.others(-1)
	return nil, all, true, e.restartAll(all, pt.CutPower)
}
