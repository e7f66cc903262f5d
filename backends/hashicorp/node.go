package hashicorp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/internal/peergate"
	"github.com/ticketd/ticketd/backends/internal/watermark"
	"github.com/ticketd/ticketd/core"
)

// Backend is this backend's name: Status().Backend, and the marker recorded in
// the data dir (badgerlog.Open), so the etcd backend refuses to open it.
const Backend = "hashicorp"

// Sentinel errors of package hashicorp. Compare with errors.Is.
var (
	// ErrDropped: an outbound Raft RPC was dropped by Config.DropMessage (fault
	// injection in tests); hashicorp/raft sees it as a failed network call.
	ErrDropped = errors.New("hashicorp: message dropped")
	// ErrMessageTooLarge: a peer sent more than Config.MaxMessageBytes
	// (plus the transport's read buffer) on one connection without waiting
	// for an answer; the connection is closed (see boundedConn).
	ErrMessageTooLarge = errors.New("hashicorp: peer message too large")
	// ErrForgedSender: a peer with a certificate claimed, in a request's
	// RPCHeader.ID, to be a member other than the one its certificate
	// names (CN = member id, as ticketctl cert create-node writes it); the
	// connection is closed (see msgFramer).
	ErrForgedSender = errors.New("hashicorp: peer claims another member's identity")
)

// Tuning of hashicorp/raft (see New for the mapping of backends.Config).
const (
	// maxAppendEntries bounds both the entries per AppendEntries RPC and the
	// proposals gathered into one log append (group commit); hashicorp's limit
	// is 1024, its default 64.
	maxAppendEntries = 512
	// logCacheSize is how many recent entries raft.LogCache keeps in memory so
	// that replication rarely reads badger.
	logCacheSize = 4 * maxAppendEntries
	// snapshotRetain is how many snapshots FileSnapshotStore keeps.
	snapshotRetain = 2
	// snapshotInterval is how often hashicorp itself checks SnapshotThreshold;
	// the node also triggers a snapshot as soon as the threshold is passed.
	snapshotInterval = 30 * time.Second
)

// Node is one ticketd server's consensus engine over hashicorp/raft, with its
// log and stable state in badger/v4 and snapshots in FileSnapshotStore. It
// implements core.Consensus and core.Membership; all methods are safe for
// concurrent use.
type Node struct {
	cfg    backends.Config
	sm     *core.StateMachine
	logger *zap.Logger
	self   core.Member

	store     nodeStore // the Raft log and stable store (cfg.LogStore)
	transport io.Closer
	closeConn func() // drops pooled peer connections (nil without a transport)
	raft      *raft.Raft
	observer  *raft.Observer
	obsCh     chan raft.Observation

	// mu guards closed and the Add side of inflight (Add never races Wait).
	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup // goroutines waiting on raft futures
	stopCh   chan struct{}  // closed by Close
	wg       sync.WaitGroup // leadership and snapshot loops

	closeOnce sync.Once
	closeErr  error
	haltOnce  sync.Once // halt: stop Raft, keep the storage open
	haltErr   error

	fatal   atomic.Pointer[error] // first fatal apply error
	fatalCh chan struct{}         // signalled once on the first fatal error

	changeMu sync.Mutex
	changeCh chan struct{} // closed and replaced on every apply and leadership change

	wm        *watermark.File // durable record of the log's end (docs/design.md#storage-and-recovery)
	recovered uint64          // applied index recorded before this start (Status.RecoveredCommitIndex)

	readyTerm atomic.Uint64 // term whose barrier this leader has applied (0: none)
	lastSnap  atomic.Uint64 // applied index at the last snapshot trigger
	snapCh    chan struct{}

	progress *progressTransport // followers' lag and last contact (progress.go); nil: not tracked

	// gate binds peer certificates to the latest configuration (peer
	// identity is membership; backends/internal/peergate).
	gate *peergate.Gate
}

var (
	_ backends.PeerLearner = (*Node)(nil)
	_ core.Consensus       = (*Node)(nil)
	_ core.Membership      = (*Node)(nil)
	_ core.TermConfirmer   = (*Node)(nil)
)

// New opens (or creates) the node's storage under cfg.DataDir, starts the TCP
// transport on cfg.BindAddr (advertising cfg.RaftAddr) and starts Raft. When
// the data dir holds no Raft state and cfg.Bootstrap is set, it bootstraps a
// new cluster with those voters; with empty Bootstrap it waits to be added by
// a leader (AddVoter).
//
// Config mapping: hashicorp's HeartbeatTimeout and ElectionTimeout are both
// cfg.ElectionTimeout (the library randomises up to 2x), its leader heartbeat
// period is fixed by the library at HeartbeatTimeout/10, which equals
// cfg.HeartbeatInterval at the defaults; LeaderLeaseTimeout is half the
// election timeout and CommitTimeout half the heartbeat interval. PreVote is
// on (hashicorp's default since v1.7 with a transport that supports it, as
// NetworkTransport does).
//
// The state machine must be fresh (or at least not ahead of this data dir):
// New restores the latest snapshot into it, and Raft replays the log after it
// once the commit index is known (core ignores indexes at or below its
// AppliedIndex, so replay is idempotent).
//
// Errors: a wrapped backends.ErrInvalidConfig, badgerlog.ErrWrongBackend when
// the data dir belongs to another backend, or the storage, network or Raft
// error that stopped it; nothing is left running on error.
func New(cfg backends.Config) (*Node, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger.With(zap.String("node", cfg.ID), zap.String("backend", Backend))
	n := &Node{
		cfg:      cfg,
		sm:       cfg.StateMachine,
		logger:   logger,
		self:     core.Member{ID: cfg.ID, RaftAddr: cfg.RaftAddr},
		obsCh:    make(chan raft.Observation, 16),
		stopCh:   make(chan struct{}),
		fatalCh:  make(chan struct{}, 1),
		changeCh: make(chan struct{}),
		snapCh:   make(chan struct{}, 1),
	}
	var err error
	cleanup := func() {
		if n.transport != nil {
			_ = n.transport.Close()
		}
		if n.wm != nil {
			_ = n.wm.Close()
		}
		if n.store != nil {
			_ = n.store.Close()
		}
	}
	if err := backends.PrepareDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	hl := newHCLog(logger.Named("raft"))
	if n.store, err = openStore(cfg, logger, hl); err != nil {
		return nil, err
	}
	store := n.store
	if cfg.Observer != nil {
		store.hooks().observe = cfg.Observer.LogAppended
	}
	// FileSnapshotStore keeps its files in <DataDir>/snapshots = badgerlog.SnapshotDir.
	snaps, err := newSnapshotStore(cfg.DataDir, snapshotRetain, hl.Named("snapshot"))
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("hashicorp: snapshot store: %w", err)
	}
	if err := n.openWatermark(store, snaps); err != nil {
		cleanup()
		return nil, err
	}
	members := &peerMembers{}
	n.gate = peergate.New(members.ids, logger.Named("transport"), backends.PeerErrorCounter(cfg.Observer))
	n.gate.Learn(cfg.Bootstrap)
	trans, closer, err := newTransport(cfg, hl, n.gate, members)
	if err != nil {
		cleanup()
		return nil, err
	}
	trans = n.trackProgress(trans)
	n.transport = closer
	if nt, ok := closer.(*raft.NetworkTransport); ok {
		n.closeConn = nt.CloseStreams
	}
	rc := raftConfig(cfg, hl)
	logs, err := raft.NewLogCache(logCacheSize, store)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("hashicorp: log cache: %w", err)
	}
	if cfg.ForceNewCluster {
		if err := forceNewCluster(cfg, rc, logs, store, snaps, trans); err != nil {
			cleanup()
			return nil, err
		}
	}
	if err := bootstrap(cfg, rc, logs, store, snaps, trans); err != nil {
		cleanup()
		return nil, err
	}
	r, err := raft.NewRaft(rc, &fsm{n: n}, logs, store, snaps, trans)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("hashicorp: start raft: %w", err)
	}
	n.raft = r
	members.r.Store(r)
	n.lastSnap.Store(n.sm.AppliedIndex())
	n.observer = raft.NewObserver(n.obsCh, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState:
			return true
		}
		return false
	})
	r.RegisterObserver(n.observer)
	n.wg.Add(2)
	go n.runLeadership()
	go n.runSnapshots()
	n.startProgress()
	return n, nil
}

// raftConfig maps backends.Config to hashicorp's Config (see New).
func raftConfig(cfg backends.Config, logger *zapHCLog) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout = cfg.ElectionTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.ElectionTimeout / 2
	rc.CommitTimeout = max(cfg.HeartbeatInterval/2, time.Millisecond)
	rc.MaxAppendEntries = maxAppendEntries
	rc.BatchApplyCh = true
	// A removed node stays up as a follower outside the configuration (it
	// starts no elections) until its owner calls Close: one place stops nodes.
	rc.ShutdownOnRemove = false
	rc.TrailingLogs = cfg.TrailingLogs
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = snapshotInterval
	// Restore the latest snapshot into the (fresh) state machine on start.
	rc.NoSnapshotRestoreOnStart = false
	rc.NoLegacyTelemetry = true
	rc.Logger = logger
	return rc
}

// bootstrap writes the initial configuration when the node has no Raft state
// and cfg.Bootstrap is set.
func bootstrap(cfg backends.Config, rc *raft.Config, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore, trans raft.Transport) error {
	if len(cfg.Bootstrap) == 0 {
		return nil
	}
	has, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return fmt.Errorf("hashicorp: check existing state: %w", err)
	}
	if has {
		return nil
	}
	if cfg.BeforeBootstrap != nil {
		if err := cfg.BeforeBootstrap(); err != nil {
			return fmt.Errorf("hashicorp: bootstrap: %w", err)
		}
	}
	var conf raft.Configuration
	for _, m := range cfg.Bootstrap {
		conf.Servers = append(conf.Servers, raft.Server{
			Suffrage: raft.Voter,
			ID:       raft.ServerID(m.ID),
			Address:  raft.ServerAddress(m.RaftAddr),
		})
	}
	if err := raft.BootstrapCluster(rc, logs, stable, snaps, trans, conf); err != nil {
		return fmt.Errorf("hashicorp: bootstrap: %w", err)
	}
	return nil
}

// Propose replicates cmd, waits until it is committed and applied locally, and
// returns the state machine's Result: Submit followed by its wait (submit.go). Concurrent proposals are group-committed
// by hashicorp's leader loop (BatchApplyCh; up to maxAppendEntries per log
// append and fsync). Errors: core.ErrInvalidArgument (unencodable cmd),
// *core.NotLeaderError, core.ErrStopped (wrapping the fatal apply error if
// one stopped the node), ctx.Err(). After a NotLeaderError returned for a
// proposal that was already appended (hashicorp's ErrLeadershipLost), or after
// a ctx error, the command may still commit.
func (n *Node) Propose(ctx context.Context, cmd core.Command) (core.Result, error) {
	data, err := core.Encode(cmd)
	if err != nil {
		return core.Result{}, err
	}
	return n.apply(ctx, data)
}

func (n *Node) apply(ctx context.Context, data []byte) (core.Result, error) {
	wait, err := n.submit(ctx, data)
	if err != nil {
		return core.Result{}, err
	}
	return wait(ctx)
}

// ReadIndex returns once this node's state machine has applied every entry
// committed before the call, with leadership confirmed by a quorum after the
// call began (Raft thesis §6.4); see ConfirmTerm. Errors:
// *core.NotLeaderError, core.ErrStopped, ctx.Err().
func (n *Node) ReadIndex(ctx context.Context) error {
	_, err := n.ConfirmTerm(ctx)
	return err
}

// ConfirmTerm implements core.TermConfirmer: ReadIndex that returns the term
// in which a quorum confirmed this node's leadership. It reads the term and
// the commit index, calls VerifyLeader, reads the term again, then waits
// until this leader's barrier of that term is applied and AppliedIndex ≥ the
// commit index read first. hashicorp's VerifyLeader does not say which term
// it confirmed; but terms only grow and the leader loop that answers it runs
// in the term current at that moment, so when the term read before and the
// term read after are equal, that term is the confirmed one. When they
// differ, leadership changed during the call and it fails with
// *core.NotLeaderError. Errors: *core.NotLeaderError, core.ErrStopped,
// ctx.Err().
func (n *Node) ConfirmTerm(ctx context.Context) (uint64, error) {
	if err := n.checkOpen(); err != nil {
		return 0, err
	}
	term := n.raft.CurrentTerm()
	if n.raft.State() != raft.Leader {
		return 0, n.notLeader()
	}
	commit := n.raft.CommitIndex()
	if _, err := n.do(ctx, func(time.Duration) raft.Future { return n.raft.VerifyLeader() }); err != nil {
		return 0, err
	}
	if n.raft.CurrentTerm() != term {
		return 0, n.notLeader()
	}
	for {
		changed := n.changes()
		if n.raft.State() != raft.Leader || n.raft.CurrentTerm() != term {
			return 0, n.notLeader()
		}
		if n.readyTerm.Load() == term && n.sm.AppliedIndex() >= commit {
			return term, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-n.stopCh:
			return 0, n.stoppedErr()
		}
	}
}

// Leader returns the leader this node knows of (ID and RaftAddr) and whether one is known.
func (n *Node) Leader() (core.Member, bool) {
	addr, id := n.raft.LeaderWithID()
	if id == "" {
		return core.Member{}, false
	}
	return core.Member{ID: string(id), RaftAddr: string(addr)}, true
}

// Status returns this node's view of the group. Members come from the latest
// (possibly uncommitted) configuration, sorted by ID.
func (n *Node) Status() core.Status {
	st := core.Status{
		ID:           n.cfg.ID,
		Backend:      Backend,
		Term:         n.raft.CurrentTerm(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.sm.AppliedIndex(),

		RecoveredCommitIndex: n.recovered,
	}
	st.Leader, _ = n.Leader()
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			st.Members = append(st.Members, core.Member{
				ID:       string(s.ID),
				RaftAddr: string(s.Address),
				Voter:    s.Suffrage == raft.Voter,
			})
		}
	}
	slices.SortFunc(st.Members, func(a, b core.Member) int { return strings.Compare(a.ID, b.ID) })
	return st
}

// AddVoter adds m as a voter (or updates its address) and returns once the
// configuration entry is committed. Must be called on the leader. Errors as
// for Propose.
func (n *Node) AddVoter(ctx context.Context, m core.Member) error {
	if m.ID == "" || m.RaftAddr == "" {
		return fmt.Errorf("%w: add voter: empty id or raft address", core.ErrInvalidArgument)
	}
	_, err := n.leaderDo(ctx, func(timeout time.Duration) raft.Future {
		return n.raft.AddVoter(raft.ServerID(m.ID), raft.ServerAddress(m.RaftAddr), 0, timeout)
	})
	return err
}

// LearnPeers implements backends.PeerLearner: a node in no configuration
// yet (a joiner before the leader's first append reaches it) accepts peer
// traffic from the members given, and from no one else (peergate); a node
// in a configuration goes by it alone. hashicorp takes the leader's address
// from its requests, so only the ids are used. It never fails.
func (n *Node) LearnPeers(_ context.Context, members []core.Member) error {
	n.gate.Learn(members)
	return nil
}

// RemoveServer removes the server id from the configuration and returns once
// the change is committed. Must be called on the leader; removing the leader
// itself makes it step down after the commit. Errors as for Propose.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: remove server: empty id", core.ErrInvalidArgument)
	}
	_, err := n.leaderDo(ctx, func(timeout time.Duration) raft.Future {
		return n.raft.RemoveServer(raft.ServerID(id), 0, timeout)
	})
	return err
}

// TransferLeadership hands leadership to voter id, or to the most up-to-date
// voter when id is empty (Raft thesis §3.10; hashicorp LeadershipTransfer),
// and returns once this node has stepped down. Proposals during the transfer
// fail with a *core.NotLeaderError naming no leader. Transferring to this
// node, already the leader, does nothing. Errors: core.ErrInvalidArgument for
// an id that is not a voter, otherwise as for Propose, or a wrapped
// "leadership transfer timeout" from the library.
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	if id == "" {
		_, err := n.leaderDo(ctx, func(time.Duration) raft.Future { return n.raft.LeadershipTransfer() })
		return err
	}
	if id == n.cfg.ID && n.raft.State() == raft.Leader {
		return nil
	}
	var addr raft.ServerAddress
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if string(s.ID) == id && s.Suffrage == raft.Voter {
				addr = s.Address
			}
		}
	}
	if addr == "" {
		return fmt.Errorf("%w: transfer leadership: %q is not a voter", core.ErrInvalidArgument, id)
	}
	_, err := n.leaderDo(ctx, func(time.Duration) raft.Future {
		return n.raft.LeadershipTransferToServer(raft.ServerID(id), addr)
	})
	return err
}

// Close stops the node: new calls fail with core.ErrStopped at once, waiting
// callers are released with core.ErrStopped, Raft futures still pending get a
// bounded grace period (2 election timeouts) to resolve, then Raft, the
// transport and badger are shut down. It is safe to call more than once and
// concurrently; every call returns the first call's result.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.close() })
	return n.closeErr
}

func (n *Node) close() error {
	var errs []error
	if err := n.halt(); err != nil {
		errs = append(errs, err)
	}
	n.raft.DeregisterObserver(n.observer)
	n.wg.Wait()
	if err := n.transport.Close(); err != nil {
		errs = append(errs, fmt.Errorf("hashicorp: close transport: %w", err))
	}
	if n.closeConn != nil {
		n.closeConn()
	}
	if err := n.closeWatermark(); err != nil {
		errs = append(errs, err)
	}
	if err := n.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("hashicorp: close %s log store: %w", n.cfg.LogStore, err))
	}
	// badger flushes its memtable into a new table file on Close.
	if err := backends.RestrictTree(n.cfg.DataDir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// halt stops the node without touching its storage: every later call is
// refused (core.ErrStopped, with the fatal error if one stopped it),
// in-flight futures resolve, and Raft shuts down (no more appends, votes or
// heartbeats). Close starts with it; the fatal path calls it alone, leaving
// badger open for the process to exit without a memtable flush (see
// runLeadership). Safe to call more than once: later calls return the
// first one's error.
func (n *Node) halt() error {
	n.haltOnce.Do(func() { n.haltErr = n.doHalt() })
	return n.haltErr
}

func (n *Node) doHalt() error {
	n.mu.Lock()
	n.closed = true
	close(n.stopCh)
	n.mu.Unlock()

	// hashicorp/raft never resolves futures stranded in its queues by
	// Shutdown, so let in-flight ones resolve while Raft still runs; then the
	// goroutines waiting on them exit and nothing leaks.
	drained := make(chan struct{})
	go func() { n.inflight.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(2 * n.cfg.ElectionTimeout):
		n.logger.Warn("closing with raft futures still pending")
	}

	if err := n.raft.Shutdown().Error(); err != nil {
		return fmt.Errorf("hashicorp: shutdown raft: %w", err)
	}
	return nil
}

// do starts a Raft operation and waits for its future, honouring ctx and
// Close (start and await, submit.go). start receives the enqueue timeout to
// pass to hashicorp (ctx's remaining time, 0 without a deadline).
func (n *Node) do(ctx context.Context, start func(timeout time.Duration) raft.Future) (raft.Future, error) {
	s, err := n.start(ctx, start)
	if err != nil {
		return nil, err
	}
	return n.await(ctx, s)
}

// leaderDo is do for operations only the leader serves.
func (n *Node) leaderDo(ctx context.Context, start func(timeout time.Duration) raft.Future) (raft.Future, error) {
	if err := n.checkOpen(); err != nil {
		return nil, err
	}
	if n.raft.State() != raft.Leader {
		return nil, n.notLeader()
	}
	return n.do(ctx, start)
}

// mapErr turns hashicorp's errors into core's (no string matching: they are
// sentinels), so that callers see only core errors
// (docs/design.md#the-consensus-contract). Any other library error (a
// leadership transfer that timed out, a restore in progress, an unsupported
// protocol) means "this leader cannot do it now": it is wrapped with a
// *core.NotLeaderError naming no leader (Unavailable, retry; the outcome of a
// command is then unknown, as after a ctx error).
func (n *Node) mapErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return &core.NotLeaderError{}
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrNotVoter):
		return n.notLeader()
	case errors.Is(err, raft.ErrRaftShutdown):
		return n.stoppedErr()
	}
	return fmt.Errorf("%w: hashicorp: %w", &core.NotLeaderError{}, err)
}

// notLeader returns a *core.NotLeaderError naming the leader this node knows,
// or none when that is itself (it is losing leadership) or unknown.
func (n *Node) notLeader() error {
	m, ok := n.Leader()
	if !ok || m.ID == n.cfg.ID {
		return &core.NotLeaderError{}
	}
	return &core.NotLeaderError{Leader: m}
}

func (n *Node) checkOpen() error {
	select {
	case <-n.stopCh:
		return n.stoppedErr()
	default:
		return nil
	}
}

// stoppedErr is core.ErrStopped, joined with the fatal apply error if one
// stopped the node.
func (n *Node) stoppedErr() error {
	if err := n.fatalErr(); err != nil {
		return err
	}
	return core.ErrStopped
}

// fatalErr returns the error that stopped the state machine, nil if none did.
// It wraps both core.ErrStopped and the apply error (core.ErrDecode).
func (n *Node) fatalErr() error {
	if p := n.fatal.Load(); p != nil {
		return *p
	}
	return nil
}

// fail records a fatal error (the first wins): an apply error, a storage
// write that failed (a full disk), or a damaged log. It logs it, tells
// Config.OnFatal, and has the node closed: skipping an entry would fork the
// state (docs/design.md#replicated-commands) and a store that failed a write
// no longer knows what is on disk, so nothing more is applied or served
// (fail-stop). It returns the recorded error, which wraps core.ErrStopped
// and cause.
func (n *Node) fail(cause error) error {
	err := fmt.Errorf("%w: node stopped: %w", core.ErrStopped, cause)
	if n.fatal.CompareAndSwap(nil, &err) {
		n.logger.Error("fatal error; stopping node", zap.Error(cause))
		if n.cfg.OnFatal != nil {
			n.cfg.OnFatal(cause)
		}
		select {
		case n.fatalCh <- struct{}{}:
		default:
		}
	}
	return n.fatalErr()
}

// changes returns a channel closed at the next apply or leadership change.
func (n *Node) changes() <-chan struct{} {
	n.changeMu.Lock()
	defer n.changeMu.Unlock()
	return n.changeCh
}

// changed wakes everything waiting on changes().
func (n *Node) changed() {
	n.changeMu.Lock()
	close(n.changeCh)
	n.changeCh = make(chan struct{})
	n.changeMu.Unlock()
}

// applied is called by the FSM after each batch: it wakes waiters and
// triggers a snapshot once SnapshotThreshold entries were applied since the
// last one.
func (n *Node) applied() {
	n.changed()
	if a := n.sm.AppliedIndex(); a >= n.lastSnap.Load()+n.cfg.SnapshotThreshold {
		select {
		case n.snapCh <- struct{}{}:
			n.lastSnap.Store(a)
		default:
		}
	}
}

// runSnapshots takes a snapshot (and so compacts the log down to
// TrailingLogs) whenever applied() asks for one.
func (n *Node) runSnapshots() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stopCh:
			return
		case <-n.snapCh:
		}
		start := time.Now()
		f := n.raft.Snapshot()
		err := f.Error()
		if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) && !errors.Is(err, raft.ErrRaftShutdown) {
			n.logger.Warn("snapshot failed", zap.Error(err))
		}
		if err == nil && n.cfg.Observer != nil {
			n.observeSnapshot(f, time.Since(start))
		}
	}
}

// observeSnapshot reports a snapshot this node took to Config.Observer,
// with its size from the snapshot store's metadata.
func (n *Node) observeSnapshot(f raft.SnapshotFuture, d time.Duration) {
	meta, rc, err := f.Open()
	if err != nil {
		return
	}
	_ = rc.Close()
	n.cfg.Observer.SnapshotTaken(meta.Size, d)
}
