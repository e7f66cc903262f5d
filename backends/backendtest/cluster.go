package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
)

// Node is what a backend under test provides: the consensus contract and
// membership changes.
type Node interface {
	core.Consensus
	core.Membership
}

// Factory opens one node from cfg (a fresh StateMachine, a DataDir that may
// hold earlier state). It is the backend's New.
type Factory func(cfg backends.Config) (Node, error)

// Timing of the clusters the suite builds: fast enough for tests, slow enough
// for a loaded 2-core machine under -race.
const (
	// HeartbeatInterval is Config.HeartbeatInterval of every test node.
	HeartbeatInterval = 50 * time.Millisecond
	// ElectionTimeout is Config.ElectionTimeout of every test node.
	ElectionTimeout = 500 * time.Millisecond
	// WaitTimeout bounds every wait of the helpers (leader, apply, convergence).
	WaitTimeout = 20 * time.Second
)

// Cluster is a set of real nodes of one backend on loopback TCP, each with its
// badger data in a t.TempDir(), sharing one fault-injection Network. It is the
// conformance suite's harness, exported so other suites (the server's) can
// build on it; hashicorp/raft's testing.go cluster is the model.
//
// Its methods call t.Fatal on failure, so call them from the test goroutine;
// Propose-like helpers that return errors are safe from any goroutine.
type Cluster struct {
	t    testing.TB
	open Factory
	// Net drops messages between partitioned nodes (Config.DropMessage).
	Net *Network
	// Tune, when set before Start, adjusts every node's Config (snapshot
	// thresholds, timeouts) before it is opened.
	Tune func(*backends.Config)

	dir    string // parent of every peer's data dir
	errors *errorCheck
	mu     sync.Mutex
	peers  []*Peer
}

// Peer is one node slot of a Cluster: its identity and data dir survive
// Kill/Restart; Node, StateMachine and the recorders are replaced on each start.
type Peer struct {
	ID      string
	Addr    string
	DataDir string

	mu      sync.Mutex
	node    Node
	sm      *core.StateMachine
	applies *ApplyLog
	leaders *LeaderLog
	// Boot is the Bootstrap list the peer was created with (empty for a joiner).
	Boot []core.Member
}

// NewCluster returns an empty cluster whose nodes are opened with open. Every
// node still running when the test ends is closed.
func NewCluster(t testing.TB, open Factory) *Cluster {
	// TempDir first: cleanups run last-in first-out, so the nodes are closed
	// before their data dirs are removed.
	c := &Cluster{t: t, open: open, Net: NewNetwork(), dir: t.TempDir(), errors: &errorCheck{}}
	// Registered before the nodes' Close, so it runs after it.
	t.Cleanup(func() {
		for _, v := range c.errors.violations() {
			t.Errorf("backend returned an error outside core's: %s", v)
		}
	})
	t.Cleanup(func() {
		for _, p := range c.Peers() {
			if n := p.Node(); n != nil {
				_ = n.Close()
			}
		}
	})
	return c
}

// Start creates and opens n bootstrapped voters (ids "n1".."nN") and returns them.
func (c *Cluster) Start(n int) []*Peer {
	c.t.Helper()
	var boot []core.Member
	var added []*Peer
	for i := 0; i < n; i++ {
		p := c.newPeer()
		boot = append(boot, core.Member{ID: p.ID, RaftAddr: p.Addr})
		added = append(added, p)
	}
	for _, p := range added {
		p.Boot = boot
		c.startPeer(p)
	}
	return added
}

// Join creates and opens one more node with no Bootstrap (it waits to be
// added with AddVoter) and returns it. A backend that is a
// backends.PeerLearner is told the current leader's members, as the server
// tells it the members of its AddMember answer.
func (c *Cluster) Join() *Peer {
	c.t.Helper()
	p := c.newPeer()
	c.startPeer(p)
	var n Node = p.Node()
	if u, ok := n.(interface{ Unwrap() Node }); ok {
		n = u.Unwrap()
	}
	if pl, ok := n.(backends.PeerLearner); ok {
		if l := c.Leader(); l != nil {
			ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
			defer cancel()
			if err := pl.LearnPeers(ctx, l.Node().Status().Members); err != nil {
				c.t.Fatalf("%s: learn peers: %v", p.ID, err)
			}
		}
	}
	return p
}

func (c *Cluster) newPeer() *Peer {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := fmt.Sprintf("n%d", len(c.peers)+1)
	p := &Peer{ID: id, Addr: FreeAddr(c.t), DataDir: filepath.Join(c.dir, id)}
	c.peers = append(c.peers, p)
	return p
}

// config returns the Config the cluster opens p with: a fresh state machine
// and recorders, the shared Network, fast timeouts, then Tune.
func (c *Cluster) config(p *Peer) (backends.Config, *core.StateMachine, *ApplyLog, *LeaderLog) {
	sm := core.NewStateMachine()
	applies := &ApplyLog{}
	leaders := &LeaderLog{}
	cfg := backends.DefaultConfig()
	cfg.ID = p.ID
	cfg.RaftAddr = p.Addr
	cfg.DataDir = p.DataDir
	cfg.Bootstrap = p.Boot
	cfg.StateMachine = sm
	cfg.HeartbeatInterval = HeartbeatInterval
	cfg.ElectionTimeout = ElectionTimeout
	cfg.OnApply = applies.record
	cfg.OnRestore = func(index uint64) { applies.recordRestore(index, sm) }
	cfg.OnLeaderChange = func(ev core.LeaderEvent) { leaders.record(ev, sm) }
	cfg.DropMessage = c.Net.Drop
	if c.Tune != nil {
		c.Tune(&cfg)
	}
	return cfg, sm, applies, leaders
}

func (c *Cluster) startPeer(p *Peer) {
	c.t.Helper()
	if err := c.openPeer(p); err != nil {
		c.t.Fatalf("open %s: %v", p.ID, err)
	}
}

// Reopen is Restart that returns the error of opening p instead of failing
// the test (for checking that a node refuses to start).
func (c *Cluster) Reopen(p *Peer) error {
	c.t.Helper()
	if p.Node() != nil {
		c.t.Fatalf("reopen %s: still running", p.ID)
	}
	return c.openPeer(p)
}

func (c *Cluster) openPeer(p *Peer) error {
	cfg, sm, applies, leaders := c.config(p)
	n, err := c.open(cfg)
	if err != nil {
		return err
	}
	n = &checkedNode{Node: n, id: p.ID, check: c.errors}
	p.mu.Lock()
	p.node, p.sm, p.applies, p.leaders = n, sm, applies, leaders
	p.mu.Unlock()
	return nil
}

// Peers returns every peer ever created, in creation order.
func (c *Cluster) Peers() []*Peer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.peers)
}

// Followers returns the running peers other than l, in start order.
func (c *Cluster) Followers(l *Peer) []*Peer {
	var out []*Peer
	for _, p := range c.Live() {
		if p != l {
			out = append(out, p)
		}
	}
	return out
}

// Live returns the peers whose node is running.
func (c *Cluster) Live() []*Peer {
	var out []*Peer
	for _, p := range c.Peers() {
		if p.Node() != nil {
			out = append(out, p)
		}
	}
	return out
}

// Peer returns the peer with id, nil if there is none.
func (c *Cluster) Peer(id string) *Peer {
	for _, p := range c.Peers() {
		if p.ID == id {
			return p
		}
	}
	return nil
}

// Kill closes p's node abruptly (Close and nothing else), as a crash would
// stop it: its data dir stays as it is.
func (c *Cluster) Kill(p *Peer) {
	c.t.Helper()
	p.mu.Lock()
	n := p.node
	p.node = nil
	p.mu.Unlock()
	if n == nil {
		c.t.Fatalf("kill %s: not running", p.ID)
	}
	if err := n.Close(); err != nil {
		c.t.Errorf("close %s: %v", p.ID, err)
	}
}

// Restart opens p again from its data dir with a fresh state machine and
// fresh recorders.
func (c *Cluster) Restart(p *Peer) {
	c.t.Helper()
	if p.Node() != nil {
		c.t.Fatalf("restart %s: still running", p.ID)
	}
	c.startPeer(p)
}

// Partition cuts the given peers off from every other peer, in both directions.
func (c *Cluster) Partition(ps ...*Peer) {
	in := map[string]bool{}
	for _, p := range ps {
		in[p.ID] = true
	}
	for _, a := range c.Peers() {
		for _, b := range c.Peers() {
			if in[a.ID] != in[b.ID] {
				c.Net.Cut(a.ID, b.ID)
			}
		}
	}
}

// Heal restores every link.
func (c *Cluster) Heal() { c.Net.Heal() }

// Leader returns the live peer that reported itself ready as leader
// (OnLeaderChange IsLeader=true) in the highest term, among ps (all live peers
// when ps is empty), or nil.
func (c *Cluster) Leader(ps ...*Peer) *Peer {
	if len(ps) == 0 {
		ps = c.Live()
	}
	var best *Peer
	var bestTerm uint64
	for _, p := range ps {
		if p.Node() == nil {
			continue
		}
		if ev, ok := p.Leaders().Last(); ok && ev.Event.IsLeader && (best == nil || ev.Event.Term > bestTerm) {
			best, bestTerm = p, ev.Event.Term
		}
	}
	return best
}

// WaitLeader waits until one of ps (all live peers when empty) is the ready
// leader, and every live peer among them knows it as leader, and returns it.
func (c *Cluster) WaitLeader(ps ...*Peer) *Peer {
	c.t.Helper()
	var got *Peer
	c.waitFor("a leader", func() bool {
		got = c.Leader(ps...)
		if got == nil {
			return false
		}
		group := ps
		if len(group) == 0 {
			group = c.Live()
		}
		for _, p := range group {
			n := p.Node()
			if n == nil {
				continue
			}
			if m, ok := n.Leader(); !ok || m.ID != got.ID {
				return false
			}
		}
		return true
	})
	return got
}

// WaitNewLeader waits for a ready leader other than old and returns it.
func (c *Cluster) WaitNewLeader(old *Peer) *Peer {
	c.t.Helper()
	var others []*Peer
	for _, p := range c.Live() {
		if p != old {
			others = append(others, p)
		}
	}
	return c.WaitLeader(others...)
}

// WaitApplied waits until every peer of ps (all live peers when empty) has
// applied index.
func (c *Cluster) WaitApplied(index uint64, ps ...*Peer) {
	c.t.Helper()
	if len(ps) == 0 {
		ps = c.Live()
	}
	c.waitFor(fmt.Sprintf("applied index %d", index), func() bool {
		for _, p := range ps {
			if p.StateMachine().AppliedIndex() < index {
				return false
			}
		}
		return true
	})
}

// EnsureSame waits until every live peer's state machine writes byte-identical
// snapshots (hence the same applied index, locks and last token) and returns
// those bytes; it fails the test when they do not converge within WaitTimeout.
func (c *Cluster) EnsureSame() []byte {
	c.t.Helper()
	var snap []byte
	var diff string
	ok := poll(WaitTimeout, func() bool {
		snap, diff = nil, ""
		for _, p := range c.Live() {
			var b bytes.Buffer
			if err := p.StateMachine().WriteSnapshot(&b); err != nil {
				diff = err.Error()
				return false
			}
			if snap == nil {
				snap = b.Bytes()
				continue
			}
			if !bytes.Equal(snap, b.Bytes()) {
				diff = fmt.Sprintf("%s differs (applied %d)", p.ID, p.StateMachine().AppliedIndex())
				return false
			}
		}
		return true
	})
	if !ok {
		c.t.Fatalf("snapshots did not converge: %s", diff)
	}
	return snap
}

// Propose proposes cmd on the current leader, retrying on *core.NotLeaderError
// and on per-attempt timeouts until ctx ends; it is safe from any goroutine.
// A retried command may apply twice: use it with commands whose retry is
// idempotent (a Grant with its own owner).
func (c *Cluster) Propose(ctx context.Context, cmd core.Command) (core.Result, error) {
	var res core.Result
	err := c.OnLeader(ctx, func(ctx context.Context, n Node) error {
		var err error
		res, err = n.Propose(ctx, cmd)
		return err
	})
	return res, err
}

// OnLeader calls fn with the current leader's node, retrying while fn fails
// with *core.NotLeaderError, core.ErrStopped (the node was killed) or its
// per-attempt timeout, until ctx ends. It is safe from any goroutine.
func (c *Cluster) OnLeader(ctx context.Context, fn func(ctx context.Context, n Node) error) error {
	for {
		var err error
		if p := c.Leader(); p == nil {
			err = errors.New("no leader")
		} else if n := p.Node(); n == nil {
			err = core.ErrStopped
		} else {
			actx, cancel := context.WithTimeout(ctx, 2*ElectionTimeout)
			err = fn(actx, n)
			cancel()
			retry := errors.Is(err, core.ErrNotLeader) || errors.Is(err, core.ErrStopped) ||
				(errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil)
			if !retry {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (c *Cluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	if !poll(WaitTimeout, cond) {
		c.t.Fatalf("timed out after %v waiting for %s", WaitTimeout, what)
	}
}

// poll calls cond every 5ms until it is true (true) or timeout passes (false).
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Node returns p's running node, nil when it is down.
func (p *Peer) Node() Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.node
}

// StateMachine returns the state machine of p's current (or last) incarnation.
func (p *Peer) StateMachine() *core.StateMachine {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sm
}

// Applies returns the OnApply record of p's current (or last) incarnation.
func (p *Peer) Applies() *ApplyLog {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applies
}

// Leaders returns the OnLeaderChange record of p's current (or last) incarnation.
func (p *Peer) Leaders() *LeaderLog {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leaders
}

// Member returns p as a core.Member (ID and RaftAddr).
func (p *Peer) Member() core.Member { return core.Member{ID: p.ID, RaftAddr: p.Addr} }

// Network is the shared partition table behind Config.DropMessage: a message
// from → to is dropped while the directed link is cut. Safe for concurrent use.
type Network struct {
	mu  sync.RWMutex
	cut map[[2]string]bool
}

// NewNetwork returns a network with every link up.
func NewNetwork() *Network { return &Network{cut: map[[2]string]bool{}} }

// Drop reports whether a message from → to is dropped; it is Config.DropMessage.
func (n *Network) Drop(from, to string) bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.cut[[2]string{from, to}]
}

// Cut drops messages between a and b in both directions.
func (n *Network) Cut(a, b string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[[2]string{a, b}] = true
	n.cut[[2]string{b, a}] = true
}

// Heal restores every link.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.cut)
}

// ApplyRecord is one OnApply call.
type ApplyRecord struct {
	Index uint64
	Cmd   core.Command
	Res   core.Result
}

// ApplyLog records OnApply and OnRestore calls in order. Safe for
// concurrent use.
type ApplyLog struct {
	mu       sync.Mutex
	recs     []ApplyRecord
	restores []RestoreRecord
}

func (l *ApplyLog) record(index uint64, cmd core.Command, res core.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, ApplyRecord{Index: index, Cmd: cmd, Res: res})
}

// Records returns a copy of the records so far.
func (l *ApplyLog) Records() []ApplyRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs)
}

// RestoreRecord is one OnRestore call.
type RestoreRecord struct {
	// Index is the index OnRestore was called with.
	Index uint64
	// AppliedIndex and LastToken are the state machine's at the call.
	AppliedIndex uint64
	LastToken    uint64
	// Applies is how many OnApply calls were recorded before it, so a test
	// can check the restore came between two applies (Records()[:Applies]
	// before it, the rest after).
	Applies int
}

func (l *ApplyLog) recordRestore(index uint64, sm *core.StateMachine) {
	rec := RestoreRecord{Index: index, AppliedIndex: sm.AppliedIndex(), LastToken: sm.LastToken()}
	l.mu.Lock()
	defer l.mu.Unlock()
	rec.Applies = len(l.recs)
	l.restores = append(l.restores, rec)
}

// Restores returns a copy of the OnRestore records so far.
func (l *ApplyLog) Restores() []RestoreRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.restores)
}

// LeaderRecord is one OnLeaderChange call with the state machine's progress
// at the moment it was delivered.
type LeaderRecord struct {
	Event        core.LeaderEvent
	AppliedIndex uint64
	LastToken    uint64
}

// LeaderLog records OnLeaderChange calls in order. Safe for concurrent use.
type LeaderLog struct {
	mu  sync.Mutex
	evs []LeaderRecord
}

func (l *LeaderLog) record(ev core.LeaderEvent, sm *core.StateMachine) {
	rec := LeaderRecord{Event: ev, AppliedIndex: sm.AppliedIndex(), LastToken: sm.LastToken()}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, rec)
}

// Records returns a copy of the records so far.
func (l *LeaderLog) Records() []LeaderRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.evs)
}

// Last returns the latest record, false if there is none.
func (l *LeaderLog) Last() (LeaderRecord, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.evs) == 0 {
		return LeaderRecord{}, false
	}
	return l.evs[len(l.evs)-1], true
}

// WithLogStore returns a Factory that opens nodes with open, their
// Config.LogStore set to store (one of backends.LogStores): the suites run
// once per store with it.
func WithLogStore(open Factory, store string) Factory {
	return func(cfg backends.Config) (Node, error) {
		cfg.LogStore = store
		return open(cfg)
	}
}

// RestoreWithLogStore returns restore with Config.LogStore set to store.
func RestoreWithLogStore(restore backends.RestoreFunc, store string) backends.RestoreFunc {
	return func(cfg backends.Config, snapshot io.Reader) error {
		cfg.LogStore = store
		return restore(cfg, snapshot)
	}
}

// ForEachLogStore runs fn as a subtest per Raft log store
// (backends.LogStores), with open and restore set to write that store
// (WithLogStore, RestoreWithLogStore): a backend's conformance test runs
// every suite on every store with it.
func ForEachLogStore(t *testing.T, open Factory, restore backends.RestoreFunc, fn func(t *testing.T, open Factory, restore backends.RestoreFunc)) {
	for _, store := range backends.LogStores() {
		t.Run(store, func(t *testing.T) {
			fn(t, WithLogStore(open, store), RestoreWithLogStore(restore, store))
		})
	}
}
