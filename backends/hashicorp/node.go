package hashicorp

import (
	"errors"
	"fmt"
	"io"
	"math"
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

// This file is the Node itself: its fields, New (storage, transport and
// Raft started in order), what it reports (Leader, Status), and how it stops
// (Close, halt, and the fail-stop path that fail starts).

// BackendName is this backend's name: Status().Backend, and the marker
// recorded in the data dir (badgerlog.Open), so the etcd backend refuses to
// open it.
const BackendName = "hashicorp"

// Tuning of hashicorp/raft (see New for the mapping of backends.Config).
const (
	// maxAppendEntries bounds both the entries per AppendEntries RPC and the
	// proposals gathered into one log append (group commit); hashicorp's limit
	// is 1024, its default 64.
	maxAppendEntries = 512
	// logCacheSize is how many recent entries raft.LogCache keeps in memory so
	// that replication rarely reads badger.
	logCacheSize = 4 * maxAppendEntries
	// snapshotRetain is how many snapshots the snapshot store keeps
	// (FileSnapshotStore's retention, snapshotstore.go).
	snapshotRetain = 2
	// snapshotInterval is how often hashicorp's snapshot goroutine wakes to
	// check its own threshold, which raftConfig sets out of reach: the node
	// asks for snapshots itself (snapshot.go).
	snapshotInterval = 30 * time.Second
)

// Node is one ticketd server's consensus engine over hashicorp/raft, with its
// log and stable state in the log store Config.LogStore names (badger/v4 or
// raft-wal) and its snapshots in FileSnapshotStore's layout. It implements
// core.Consensus and core.Membership; all methods are safe for concurrent use.
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
	lastSnap  atomic.Uint64 // applied index at the last snapshot trigger or restore
	logBytes  atomic.Uint64 // bytes of entry data applied since then
	snapBytes atomic.Uint64 // bytes of the latest snapshot taken or restored
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
	logger := cfg.Logger.With(zap.String("node", cfg.ID), zap.String("backend", BackendName))
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
	// The snapshots live in <DataDir>/snapshots = badgerlog.SnapshotDir.
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
	// From here every stable write is hashicorp/raft's run loop's (NewRaft's
	// own rewrite of the stored term writes nothing: Set skips a value
	// already stored), and a failed one stops the node (stableFailed).
	store.hooks().raftRuns.Store(true)
	r, err := raft.NewRaft(rc, &fsm{n: n}, logs, store, snaps, trans)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("hashicorp: start raft: %w", err)
	}
	n.raft = r
	members.r.Store(r)
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
	// hashicorp's own check snapshots every SnapshotThreshold entries
	// whatever the table's size; it is off, and the node asks for a
	// snapshot when backends.SnapshotDue says one is due (snapshot.go).
	rc.SnapshotThreshold = math.MaxUint64
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
		Backend:      BackendName,
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
