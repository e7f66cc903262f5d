package memraft

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
)

// BackendName is the name reported in Status().Backend.
const BackendName = "memraft"

// Node is a single-node in-memory consensus group. It is safe for concurrent
// use; proposals are applied one at a time in arrival order.
type Node struct {
	cfg backends.Config

	applyMu sync.Mutex // serialises apply + OnApply, like a backend's apply goroutine

	mu      sync.Mutex
	index   uint64
	term    uint64
	leader  core.Member // zero when unknown
	members map[string]core.Member
	hook    func(core.Command)
	stopped bool

	// Step-by-step mode (hold.go): proposals and reads wait in log and reads
	// until the caller commits, applies and confirms them.
	holdProposals bool
	holdReads     bool
	log           []*entry    // proposed, not yet applied, in log order
	reads         []*heldRead // ReadIndex/ConfirmTerm calls not yet answered
	applyHook     func(uint64, core.Command, core.Result)
	recovered     uint64 // Status().RecoveredCommitIndex

	// durable is every entry applied, in index order, when keep is set
	// (NewDurable, Recover): the log a restart recovers from.
	keep    bool
	durable []Entry

	events chan core.LeaderEvent
	done   chan struct{}
	wg     sync.WaitGroup
}

// New starts a node that elects itself: it applies a Noop barrier of term 1 and
// then reports IsLeader=true through cfg.OnLeaderChange (asynchronously, as a
// real backend does). Errors: cfg.Validate's.
func New(cfg backends.Config) (*Node, error) { return start(cfg, false) }

// NewDurable is New for a node that keeps every entry it applies, so that a
// restart can be simulated with Entries and Recover (the entries stay in
// memory: not for long benchmarks).
func NewDurable(cfg backends.Config) (*Node, error) { return start(cfg, true) }

// start is New, keeping the applied entries when keep is set.
func start(cfg backends.Config, keep bool) (*Node, error) {
	n, err := build(cfg, keep)
	if err != nil {
		return nil, err
	}
	n.wg.Add(1)
	go n.deliver()
	n.Promote()
	return n, nil
}

// build returns a node of cfg that is not running yet, at the state
// machine's applied index. Errors: cfg.Validate's.
func build(cfg backends.Config, keep bool) (*Node, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	self := core.Member{ID: cfg.ID, RaftAddr: cfg.RaftAddr, Voter: true}
	n := &Node{
		cfg:     cfg,
		members: map[string]core.Member{cfg.ID: self},
		events:  make(chan core.LeaderEvent, 64),
		done:    make(chan struct{}),
		keep:    keep,
	}
	n.index = cfg.StateMachine.AppliedIndex()
	return n, nil
}

// Entry is one applied entry of the log: its index and encoded command.
type Entry struct {
	Index uint64
	Data  []byte
}

// Entries returns every entry this node applied (including those it
// recovered), in index order: what a restarted node finds in its log. Empty
// unless the node was built with NewDurable or Recover.
func (n *Node) Entries() []Entry {
	n.applyMu.Lock()
	defer n.applyMu.Unlock()
	return append([]Entry(nil), n.durable...)
}

// Recover starts a node from log, the Entries of an earlier node (a
// restart): like a real backend opening its data dir, it replays every
// entry through the state machine and OnApply before it returns, then starts
// as a follower of term with no leader known (call Promote to make it lead,
// Replicate to apply a successor's entries). Entries the earlier node held
// but had not applied are not in Entries: they are lost, as an uncommitted
// tail is. Errors: cfg.Validate's, the state machine's for an entry it
// cannot apply.
func Recover(cfg backends.Config, log []Entry, term uint64) (*Node, error) {
	n, err := build(cfg, true)
	if err != nil {
		return nil, err
	}
	n.term = term
	for _, e := range log {
		if e.Index <= n.index {
			continue
		}
		if e.Index != n.index+1 {
			return nil, fmt.Errorf("memraft: recover: entry %d after %d", e.Index, n.index)
		}
		if _, err := n.applyData(e.Data); err != nil {
			return nil, err
		}
	}
	n.recovered = n.index
	n.wg.Add(1)
	go n.deliver()
	n.emit(core.LeaderEvent{IsLeader: false, Term: term})
	return n, nil
}

// deliver calls OnLeaderChange from one goroutine, in order.
func (n *Node) deliver() {
	defer n.wg.Done()
	for {
		select {
		case ev := <-n.events:
			if n.cfg.OnLeaderChange != nil {
				n.cfg.OnLeaderChange(ev)
			}
		case <-n.done:
			return
		}
	}
}

// Promote makes this node leader of a new term: it commits and applies every
// entry still in its log (a new leader's barrier commits all earlier entries of
// its log, Raft thesis §3.6.2), applies a barrier (Noop) entry of that term and
// then reports IsLeader=true.
func (n *Node) Promote() {
	n.mu.Lock()
	n.term++
	n.leader = n.members[n.cfg.ID]
	term := n.term
	n.mu.Unlock()
	n.Commit(-1)
	n.Apply(-1)
	n.apply(core.Noop())
	n.emit(core.LeaderEvent{IsLeader: true, Leader: n.self(), Term: term})
}

// Demote makes this node a follower of a new term whose leader is leader (zero
// for "no leader known") and reports IsLeader=false.
func (n *Node) Demote(leader core.Member) {
	n.mu.Lock()
	n.term++
	n.leader = leader
	term := n.term
	n.mu.Unlock()
	n.failUncommitted(leader)
	n.emit(core.LeaderEvent{IsLeader: false, Leader: leader, Term: term})
}

// SetProposeHook sets fn to be called with every proposed command before it is
// applied, outside any lock; fn may block to hold the proposal. nil removes it.
func (n *Node) SetProposeHook(fn func(core.Command)) {
	n.mu.Lock()
	n.hook = fn
	n.mu.Unlock()
}

func (n *Node) emit(ev core.LeaderEvent) {
	select {
	case n.events <- ev:
	case <-n.done:
	}
}

func (n *Node) self() core.Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.members[n.cfg.ID]
}

// apply applies cmd at the next index and calls OnApply.
func (n *Node) apply(cmd core.Command) (core.Result, error) {
	data, err := core.Encode(cmd)
	if err != nil {
		return core.Result{}, err
	}
	return n.applyData(data)
}

// applyData applies the encoded command data at the next index, keeps it in
// the durable log and calls OnApply.
func (n *Node) applyData(data []byte) (core.Result, error) {
	n.applyMu.Lock()
	defer n.applyMu.Unlock()
	n.mu.Lock()
	n.index++
	index := n.index
	applyHook := n.applyHook
	n.mu.Unlock()
	cmd, res, err := n.cfg.StateMachine.ApplyEntry(index, data)
	if err != nil {
		return core.Result{}, fmt.Errorf("memraft: %w", err)
	}
	if n.keep {
		n.durable = append(n.durable, Entry{Index: index, Data: data})
	}
	if n.cfg.OnApply != nil {
		n.cfg.OnApply(index, cmd, res)
	}
	if applyHook != nil {
		core.EachRenewal(cmd, res, func(cmd core.Command, res core.Result) { applyHook(index, cmd, res) })
	}
	return res, nil
}

// leaderCheck returns nil when this node leads, else a *core.NotLeaderError or ErrStopped.
func (n *Node) leaderCheck() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return core.ErrStopped
	}
	if n.leader.ID != n.cfg.ID {
		return &core.NotLeaderError{Leader: n.leader}
	}
	return nil
}

// Propose applies cmd at once when this node leads: Submit followed by its
// wait. Errors: *core.NotLeaderError, core.ErrStopped,
// core.ErrInvalidArgument (unencodable), ctx.Err() (checked before the
// command is applied; like a real backend, a command whose caller gave up
// during the propose hook is still applied).
func (n *Node) Propose(ctx context.Context, cmd core.Command) (core.Result, error) {
	wait, err := n.Submit(ctx, cmd)
	if err != nil {
		return core.Result{}, err
	}
	return wait(ctx)
}

// Submit implements core.Submitter: after the propose hook, cmd is appended
// to the held log (step-by-step mode) or applied at once, both in call order,
// before Submit returns; wait returns its answer. Errors are Propose's; an
// unencodable command's error comes from wait.
func (n *Node) Submit(ctx context.Context, cmd core.Command) (func(context.Context) (core.Result, error), error) {
	if err := n.leaderCheck(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n.mu.Lock()
	hook := n.hook
	n.mu.Unlock()
	if hook != nil {
		hook(cmd)
	}
	if err := n.leaderCheck(); err != nil {
		return nil, err
	}
	if e, held := n.append(cmd); held {
		return e.wait, nil
	}
	res, err := n.apply(cmd)
	return func(ctx context.Context) (core.Result, error) {
		if err != nil {
			return res, err
		}
		if err := ctx.Err(); err != nil {
			return core.Result{}, err
		}
		return res, nil
	}, nil
}

// ReadIndex returns nil when this node leads and everything committed is
// applied. In step-by-step mode it waits for Confirm (HoldReads) or for the
// committed entries to apply; see ConfirmTerm.
func (n *Node) ReadIndex(ctx context.Context) error {
	_, err := n.ConfirmTerm(ctx)
	return err
}

// ConfirmTerm implements core.TermConfirmer: ReadIndex that returns the term
// in which leadership was confirmed. A held read is confirmed when it is
// answered (Confirm), in the term current then: like a ReadIndex whose
// heartbeat round started late, it may confirm a later term than the one the
// caller saw when it decided to read. Errors: *core.NotLeaderError,
// core.ErrStopped, ctx.Err().
func (n *Node) ConfirmTerm(ctx context.Context) (uint64, error) {
	if err := n.leaderCheck(); err != nil {
		return 0, err
	}
	if r, held := n.queueRead(); held {
		return r.wait(ctx)
	}
	n.mu.Lock()
	term := n.term
	n.mu.Unlock()
	return term, ctx.Err()
}

// Leader returns the leader this node knows of.
func (n *Node) Leader() (core.Member, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.leader, n.leader.ID != ""
}

// Status returns this node's view of the group.
func (n *Node) Status() core.Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := core.Status{
		ID:           n.cfg.ID,
		Backend:      BackendName,
		Leader:       n.leader,
		Term:         n.term,
		CommitIndex:  n.index + uint64(n.committedLocked()),
		AppliedIndex: n.cfg.StateMachine.AppliedIndex(),

		RecoveredCommitIndex: n.recovered,
	}
	for _, m := range n.members {
		st.Members = append(st.Members, m)
	}
	sort.Slice(st.Members, func(i, j int) bool { return st.Members[i].ID < st.Members[j].ID })
	return st
}

// AddVoter records m as a voter (no replication happens: this is one node).
// Errors: core.ErrInvalidArgument for an empty id or Raft address, as the
// real backends; then as for Propose.
func (n *Node) AddVoter(ctx context.Context, m core.Member) error {
	if m.ID == "" || m.RaftAddr == "" {
		return fmt.Errorf("%w: memraft: add voter: empty id or raft address", core.ErrInvalidArgument)
	}
	if err := n.leaderCheck(); err != nil {
		return err
	}
	n.mu.Lock()
	m.Voter = true
	m.APIAddr = ""
	n.members[m.ID] = m
	n.mu.Unlock()
	return ctx.Err()
}

// RemoveServer forgets the member id. Errors: core.ErrInvalidArgument for
// an empty id, as the real backends; then as for Propose.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: memraft: remove server: empty id", core.ErrInvalidArgument)
	}
	if err := n.leaderCheck(); err != nil {
		return err
	}
	n.mu.Lock()
	delete(n.members, id)
	n.mu.Unlock()
	return ctx.Err()
}

// TransferLeadership succeeds only for this node's own id (or ""), since there
// is no other node to lead.
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	if err := n.leaderCheck(); err != nil {
		return err
	}
	if id != "" && id != n.cfg.ID {
		return fmt.Errorf("%w: memraft: no voter %q to transfer to", core.ErrInvalidArgument, id)
	}
	return ctx.Err()
}

// Close stops the node; later calls return core.ErrStopped. Safe to call twice.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return nil
	}
	n.stopped = true
	n.mu.Unlock()
	n.failAll()
	close(n.done)
	n.wg.Wait()
	return nil
}

var (
	_ core.Consensus  = (*Node)(nil)
	_ core.Membership = (*Node)(nil)
)
