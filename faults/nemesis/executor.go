package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"time"
)

// Target is the cluster an Executor injects faults into. Nodes are numbered
// 0..Size()-1. Methods are called from the Executor's goroutine, except that
// Kill may run concurrently for different nodes (RestartAll).
type Target interface {
	// Size returns the number of nodes.
	Size() int
	// Leader returns the node that leads now; it gives up with an error when
	// ctx ends first.
	Leader(ctx context.Context) (int, error)
	// Kill sends SIGKILL to node i and waits until it has exited.
	Kill(i int) error
	// Start starts node i again (same id, addresses, data) after Kill.
	Start(i int) error
	// Pause stops node i with SIGSTOP; Resume continues it with SIGCONT.
	Pause(i int) error
	Resume(i int) error
	// Cut replaces the set of cut links: for each {from, to} in links, every
	// Raft message from node `from` to node `to` is dropped. nil heals all.
	Cut(links [][2]int) error
	// TransferLeader asks leader `from` to hand leadership to node `to`.
	TransferLeader(ctx context.Context, from, to int) error
	// RemoveMember removes node i from the Raft configuration; AddMember adds
	// it back as a voter.
	RemoveMember(ctx context.Context, i int) error
	AddMember(ctx context.Context, i int) error
}

// Event records one fault as the Executor carried it out.
type Event struct {
	Fault Fault
	// Start and End are when the fault was injected and healed, on the
	// Executor's clock (nanoseconds); End == Start for instantaneous faults.
	Start, End int64
	// Nodes are the nodes the fault hit (for a partition: the minority side
	// or the leader).
	Nodes []int
	// Err is what went wrong injecting or healing it ("" if nothing).
	Err string
}

// String formats e on one line.
func (e Event) String() string {
	s := fmt.Sprintf("%9.3fs-%9.3fs %s nodes %v", float64(e.Start)/1e9, float64(e.End)/1e9, e.Fault.Kind, e.Nodes)
	if e.Err != "" {
		s += " error: " + e.Err
	}
	return s
}

// Sentinel errors of package nemesis.
var (
	// ErrNoLeader: a fault aimed at the leader found none in time; it was skipped.
	ErrNoLeader = errors.New("nemesis: no leader")
	// ErrNotNetwork: a network fault (NetKinds) was scheduled for a Target
	// that is not a NetTarget; it was skipped.
	ErrNotNetwork = errors.New("nemesis: target has no network")
)

// leaderWait bounds the search for a leader and each membership or
// transfer call.
const leaderWait = 10 * time.Second

// Executor injects the faults of a Schedule into a Target and heals them.
// Run and HealAll must not be called concurrently; Events may be.
type Executor struct {
	target Target
	now    func() int64

	mu     sync.Mutex
	events []Event

	killed  map[int]bool
	paused  map[int]bool
	removed map[int]bool
	cut     bool
	net     netState
	disk    []int                // nodes whose data dir is on a full file system (DiskFull)
	damaged map[int]func() error // nodes with flipped log bytes, and the undo (DamageLog)
}

// NewExecutor returns an Executor for target; now is the clock of Events
// (nanoseconds; use the history Recorder's Now so faults and operations
// share one time line).
func NewExecutor(target Target, now func() int64) *Executor {
	return &Executor{target: target, now: now,
		killed: map[int]bool{}, paused: map[int]bool{}, removed: map[int]bool{}}
}

// Events returns a copy of the events so far, in order.
func (e *Executor) Events() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Event(nil), e.events...)
}

func (e *Executor) record(ev Event) {
	e.mu.Lock()
	e.events = append(e.events, ev)
	e.mu.Unlock()
}

// sleep waits for d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Run injects the faults of s, each at s's offset from the moment Run is
// called, holding each for its Duration and healing it before the next. It
// returns when every fault is done or ctx ends (a fault in progress is then
// left for HealAll).
func (e *Executor) Run(ctx context.Context, s Schedule) {
	start := time.Now()
	for _, f := range s.Faults {
		if !sleep(ctx, time.Until(start.Add(f.At))) {
			return
		}
		ev := Event{Fault: f, Start: e.now()}
		heal, nodes, err := e.inject(ctx, f)
		ev.Nodes = nodes
		if err != nil {
			ev.Err = err.Error()
			ev.End = e.now()
			e.record(ev)
			continue
		}
		ok := sleep(ctx, f.Duration)
		if !ok {
			ev.End = e.now()
			ev.Err = "interrupted; healed by HealAll"
			e.record(ev)
			return
		}
		if heal != nil {
			if err := heal(ctx); err != nil {
				ev.Err = "heal: " + err.Error()
			}
		}
		ev.End = e.now()
		e.record(ev)
	}
}

// pick returns candidates[p % len] (-1 if there is none).
func pick(candidates []int, p int) int {
	if len(candidates) == 0 {
		return -1
	}
	return candidates[p%len(candidates)]
}

func (e *Executor) leader(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, leaderWait)
	defer cancel()
	l, err := e.target.Leader(ctx)
	if err != nil {
		return -1, fmt.Errorf("%w: %w", ErrNoLeader, err)
	}
	return l, nil
}

func (e *Executor) others(of int) []int {
	var out []int
	for i := range e.target.Size() {
		if i != of {
			out = append(out, i)
		}
	}
	return out
}

// inject starts fault f and returns the function that heals it (nil for
// instantaneous faults) and the nodes it hit.
func (e *Executor) inject(ctx context.Context, f Fault) (func(context.Context) error, []int, error) {
	n := e.target.Size()
	all := e.others(-1)
	switch f.Kind {
	case KillNode, KillLeader:
		i := pick(all, f.Pick)
		if f.Kind == KillLeader {
			var err error
			if i, err = e.leader(ctx); err != nil {
				return nil, nil, err
			}
		}
		if err := e.kill(i); err != nil {
			return nil, []int{i}, err
		}
		return func(context.Context) error { return e.start(i) }, []int{i}, nil
	case PauseNode, PauseLeader, PauseLeaderLease:
		i := pick(all, f.Pick)
		if f.Kind != PauseNode {
			var err error
			if i, err = e.leader(ctx); err != nil {
				return nil, nil, err
			}
		}
		if err := e.target.Pause(i); err != nil {
			return nil, []int{i}, err
		}
		e.paused[i] = true
		return func(context.Context) error { return e.resume(i) }, []int{i}, nil
	case IsolateLeader, OneWayFromLeader, OneWayToLeader:
		l, err := e.leader(ctx)
		if err != nil {
			return nil, nil, err
		}
		var links [][2]int
		for _, j := range e.others(l) {
			if f.Kind != OneWayToLeader {
				links = append(links, [2]int{l, j})
			}
			if f.Kind != OneWayFromLeader {
				links = append(links, [2]int{j, l})
			}
		}
		return e.cutLinks(links, []int{l})
	case PartitionHalves:
		perm := rand.New(rand.NewSource(int64(f.Pick))).Perm(n)
		minority := append([]int(nil), perm[:(n-1)/2]...)
		sort.Ints(minority)
		in := map[int]bool{}
		for _, i := range minority {
			in[i] = true
		}
		var links [][2]int
		for a := range n {
			for b := range n {
				if in[a] != in[b] {
					links = append(links, [2]int{a, b})
				}
			}
		}
		return e.cutLinks(links, minority)
	case TransferLeader:
		l, err := e.leader(ctx)
		if err != nil {
			return nil, nil, err
		}
		to := pick(e.others(l), f.Pick)
		tctx, cancel := context.WithTimeout(ctx, leaderWait)
		defer cancel()
		return nil, []int{l, to}, e.target.TransferLeader(tctx, l, to)
	case RemoveReAdd:
		i := pick(all, f.Pick)
		rctx, cancel := context.WithTimeout(ctx, leaderWait)
		defer cancel()
		if err := e.target.RemoveMember(rctx, i); err != nil {
			// The removal may have committed all the same: re-add at once.
			e.removed[i] = true
			if aerr := e.readd(ctx, i); aerr != nil {
				err = errors.Join(err, aerr)
			}
			return nil, []int{i}, err
		}
		e.removed[i] = true
		return func(ctx context.Context) error { return e.readd(ctx, i) }, []int{i}, nil
	case RestartAll:
		return nil, all, e.restartAll(all, nil)
	}
	if heal, nodes, handled, err := e.injectNet(ctx, f); handled {
		return heal, nodes, err
	}
	if heal, nodes, handled, err := e.injectDisk(f); handled {
		return heal, nodes, err
	}
	if heal, nodes, handled, err := e.injectPower(f); handled {
		return heal, nodes, err
	}
	return nil, nil, fmt.Errorf("nemesis: unknown fault kind %q", f.Kind)
}

// restartAll kills every node at once (concurrently), calls whileDown (if
// not nil: a power cut drops the unsynced writes then), then starts them
// all.
func (e *Executor) restartAll(all []int, whileDown func() error) error {
	for _, i := range all {
		if e.paused[i] {
			if err := e.resume(i); err != nil {
				return err
			}
		}
		e.killed[i] = true
	}
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for j, i := range all {
		wg.Add(1)
		go func() { defer wg.Done(); errs[j] = e.target.Kill(i) }()
	}
	wg.Wait()
	if whileDown != nil {
		errs = append(errs, whileDown())
	}
	for _, i := range all {
		errs = append(errs, e.start(i))
	}
	return errors.Join(errs...)
}

func (e *Executor) kill(i int) error {
	if e.paused[i] {
		if err := e.resume(i); err != nil {
			return err
		}
	}
	e.killed[i] = true
	return e.target.Kill(i)
}

func (e *Executor) start(i int) error {
	if err := e.target.Start(i); err != nil {
		return err
	}
	delete(e.killed, i)
	return nil
}

func (e *Executor) resume(i int) error {
	if err := e.target.Resume(i); err != nil {
		return err
	}
	delete(e.paused, i)
	return nil
}

func (e *Executor) cutLinks(links [][2]int, nodes []int) (func(context.Context) error, []int, error) {
	e.cut = true
	if err := e.target.Cut(links); err != nil {
		return nil, nodes, err
	}
	return func(context.Context) error { return e.heal() }, nodes, nil
}

func (e *Executor) heal() error {
	if err := e.target.Cut(nil); err != nil {
		return err
	}
	e.cut = false
	return nil
}

// readd adds node i back, retrying (a leader may be changing) until it
// succeeds or ctx ends.
func (e *Executor) readd(ctx context.Context, i int) error {
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		actx, cancel := context.WithTimeout(ctx, leaderWait)
		err = e.target.AddMember(actx, i)
		cancel()
		if err == nil {
			delete(e.removed, i)
			return nil
		}
		if !sleep(ctx, 250*time.Millisecond) {
			break
		}
	}
	return err
}

// HealAll undoes every fault still in effect: it heals cut links, resumes
// paused nodes, starts killed ones and adds removed ones back. It returns
// the errors it met, joined.
func (e *Executor) HealAll(ctx context.Context) error {
	var errs []error
	if e.cut {
		errs = append(errs, e.heal())
	}
	errs = append(errs, e.healNet())
	errs = append(errs, e.healDisk())
	for i := range e.target.Size() {
		if e.paused[i] {
			errs = append(errs, e.resume(i))
		}
	}
	for i := range e.target.Size() {
		if e.killed[i] {
			errs = append(errs, e.start(i))
		}
	}
	for i := range e.target.Size() {
		if e.removed[i] {
			errs = append(errs, e.readd(ctx, i))
		}
	}
	return errors.Join(errs...)
}
