package etcd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/etcd/internal/transport"
	"github.com/ticketd/ticketd/backends/internal/peergate"
	"github.com/ticketd/ticketd/backends/internal/watermark"
	"github.com/ticketd/ticketd/core"
)

// BackendName is the name of this backend in Status and in the data dir's
// backend marker.
const BackendName = "etcd"

// Raft tuning that Config does not expose.
const (
	maxSizePerMsg             = 1 << 20  // bytes of entries in one MsgApp
	maxInflightMsgs           = 256      // MsgApps in flight per follower
	maxUncommittedEntriesSize = 64 << 20 // bytes; past it the leader drops proposals
	maxProposalBatch          = 4096     // proposals drained into one MsgProp
	maxRecvBatch              = 256      // received batches stepped before a Ready
	chanSize                  = 4096
)

// Node is one member of a ticketd cluster run by etcd raft: a core.Consensus
// and a core.Membership. All methods are safe for concurrent use.
type Node struct {
	cfg   backends.Config
	id    uint64
	log   *zap.Logger
	sm    *core.StateMachine
	db    *badger.DB
	store raftStorage // the log store's (Config.LogStore)
	tr    *transport.Transport
	rn    *raft.RawNode // owned by the loop goroutine after New
	note  *notifier

	propc  chan *proposal
	recvc  chan inbound
	readc  chan *readRequest
	confc  chan *confRequest
	transc chan *transferRequest
	snapc  chan snapshotResult // the snapshot goroutine's result (snapshot.go)

	// snapWG counts the snapshot goroutine, which closeResources waits for
	// before it closes the store. snapshotHook, when set (by tests only),
	// is called by that goroutine before it encodes and writes.
	snapWG       sync.WaitGroup
	snapshotHook atomic.Pointer[func(index uint64)]

	stopc     chan struct{} // closed by Close
	done      chan struct{} // closed when the loop has exited
	closeOnce sync.Once
	closeErr  error

	nextID atomic.Uint64 // proposal and conf change ids

	wm        *watermark.File // durable record of the log's end (docs/design.md#storage-and-recovery)
	recovered uint64          // Status().RecoveredCommitIndex, set by open

	mu    sync.RWMutex // guards view and fatal
	view  statusView
	fatal error

	// gate binds peer certificates to the applied configuration (peer
	// identity is membership; backends/internal/peergate); memberIDs is
	// its source, the ids of the members refreshMembers last listed (nil
	// until open has read the configuration).
	gate      *peergate.Gate
	memberIDs atomic.Pointer[[]string]

	loopState // owned by the loop goroutine
}

// statusView is what Status, Leader and the not-leader fast paths read.
type statusView struct {
	term, commit, applied uint64
	lead                  uint64
	state                 raft.StateType
	leader                core.Member
	members               []core.Member
}

// New opens (or creates) the node's state under cfg.DataDir, bootstraps a new
// cluster from cfg.Bootstrap when the data dir is empty, restores
// cfg.StateMachine from the latest snapshot, listens on cfg.BindAddr and
// starts the raft loop. A node with an empty data dir and no Bootstrap waits
// for the leader to add it (AddVoter) and learns the cluster from it.
//
// Errors: backends.ErrInvalidConfig, badgerlog.ErrWrongBackend (the data dir
// belongs to the hashicorp backend), ErrCorrupt (damaged data on disk),
// core.ErrDecode (an undecodable snapshot), or the listener's and badger's.
func New(cfg backends.Config) (*Node, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg:    cfg,
		id:     raftID(cfg.ID),
		log:    cfg.Logger.Named("etcd").With(zap.String("node", cfg.ID)),
		sm:     cfg.StateMachine,
		propc:  make(chan *proposal, chanSize),
		recvc:  make(chan inbound, chanSize),
		readc:  make(chan *readRequest, chanSize),
		confc:  make(chan *confRequest, 16),
		transc: make(chan *transferRequest, 16),
		snapc:  make(chan snapshotResult, 1),
		stopc:  make(chan struct{}),
		done:   make(chan struct{}),
	}
	n.gate = peergate.New(n.currentMemberIDs, n.log.Named("transport"), backends.PeerErrorCounter(cfg.Observer))
	n.gate.Learn(cfg.Bootstrap)
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	// Random start: ids from an earlier run of this node, still in the log,
	// never match a waiter of this run.
	n.nextID.Store(binary.BigEndian.Uint64(seed[:]))
	if err := n.open(); err != nil {
		n.closeResources()
		return nil, err
	}
	n.note = newNotifier(cfg.OnLeaderChange)
	go n.run()
	return n, nil
}

// open does New's work up to starting the loop.
func (n *Node) open() error {
	if err := backends.PrepareDataDir(n.cfg.DataDir); err != nil {
		return err
	}
	store, db, err := openStorage(n.cfg, n.cfg.Logger)
	if err != nil {
		return err
	}
	n.store, n.db = store, db
	if err := backends.RestrictTree(n.cfg.DataDir); err != nil {
		return err
	}
	if err := n.openWatermark(); err != nil {
		return err
	}
	if n.cfg.ForceNewCluster {
		if err := n.forceNewCluster(); err != nil {
			return err
		}
	}
	if n.store.IsEmpty() && len(n.cfg.Bootstrap) > 0 {
		if err := n.bootstrap(); err != nil {
			return err
		}
	}
	n.book = addressBook{}
	if data := n.store.Peers(); data != nil {
		if n.book, err = decodeBook(data); err != nil {
			return fmt.Errorf("etcd: data dir %s: %w", n.cfg.DataDir, err)
		}
	}
	snap, _ := n.store.Snapshot()
	if !raft.IsEmptySnap(snap) {
		book, state, err := decodeSnapshotData(snap.GetData())
		if err != nil {
			return fmt.Errorf("etcd: snapshot %d: %w", snap.GetMetadata().GetIndex(), err)
		}
		if err := n.sm.Restore(bytes.NewReader(state)); err != nil {
			return fmt.Errorf("etcd: restore snapshot %d: %w", snap.GetMetadata().GetIndex(), err)
		}
		if fn := n.cfg.OnRestore; fn != nil {
			fn(n.sm.AppliedIndex())
		}
		for nid, p := range book {
			if _, ok := n.book[nid]; !ok {
				n.book[nid] = p
			}
		}
	}
	n.applied = snap.GetMetadata().GetIndex()
	n.snapIndex = n.applied
	n.snapBytes = uint64(len(snap.GetData())) // the log replayed after it counts in logBytes
	hs, cs, _ := n.store.InitialState()
	n.confState = cs
	n.hs = hs
	n.recovered = max(n.recovered, hs.GetCommit())
	if n.hs == nil {
		n.hs = &pb.HardState{}
	}
	n.book[n.id] = peerInfo{ID: n.cfg.ID, RaftAddr: n.cfg.RaftAddr}
	n.pending = map[uint64]*proposal{}

	n.tr, err = transport.New(transport.Config{
		NodeID:   n.id,
		ID:       n.cfg.ID,
		Addr:     n.cfg.RaftAddr,
		BindAddr: n.cfg.BindAddr,
		Deliver:  n.deliver,
		Logger:   n.log,
		// Mutual TLS and bounded reads
		// (docs/security.md#peer-transport-bounds).
		TLS:             n.cfg.PeerTLS,
		MaxMessageBytes: n.cfg.MaxMessageBytes,
		CountError:      backends.PeerErrorCounter(n.cfg.Observer),
		// Connection cap and idle timeout
		// (docs/security.md#peer-transport-bounds).
		MaxConns:      n.cfg.MaxPeerConns,
		MaxConnsPerIP: n.cfg.MaxPeerConnsPerIP,
		IdleTimeout:   n.cfg.PeerIdleTimeout,
		// A peer certificate must name a current member and may only
		// send as that member's raft id (peergate).
		Gate:   n.gate,
		RaftID: raftID,
	})
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	for nid, p := range n.book {
		n.tr.SetPeer(nid, p.RaftAddr)
	}

	n.electionTick = int(n.cfg.ElectionTimeout / n.cfg.HeartbeatInterval)
	rc := &raft.Config{
		ID:                        n.id,
		ElectionTick:              n.electionTick,
		HeartbeatTick:             1,
		Storage:                   n.store,
		Applied:                   n.applied,
		MaxSizePerMsg:             maxSizePerMsg,
		MaxInflightMsgs:           maxInflightMsgs,
		MaxUncommittedEntriesSize: maxUncommittedEntriesSize,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		Logger:                    raftLogger{n.log.Named("raft").Sugar()},
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
	}
	if err := n.newRawNode(rc); err != nil {
		return err
	}
	if slices.Equal(n.confState.GetVoters(), []uint64{n.id}) {
		_ = n.rn.Campaign() // a single voter need not wait an election timeout
	}
	n.refreshMembers()
	n.publish()
	return nil
}

// newRawNode creates the RawNode, turning raft's panics on inconsistent
// storage into an error.
func (n *Node) newRawNode(rc *raft.Config) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: raft refused the stored state: %v", ErrCorrupt, r)
		}
	}()
	n.rn, err = raft.NewRawNode(rc)
	if err != nil {
		return fmt.Errorf("etcd: new raft node: %w", err)
	}
	return nil
}

// bootstrap writes the initial state of a new cluster: a snapshot at index 1,
// term 1 whose ConfState lists the Bootstrap voters and whose Data holds their
// addresses and an empty state machine, the way etcd raft's doc recommends
// ("a Storage that has a first index > 1 and which stores the desired
// ConfState"). Every bootstrap member writes the same.
func (n *Node) bootstrap() error {
	book, voters, err := bootstrapBook(n.cfg.Bootstrap)
	if err != nil {
		return err
	}
	if n.cfg.BeforeBootstrap != nil {
		if err := n.cfg.BeforeBootstrap(); err != nil {
			return fmt.Errorf("etcd: bootstrap: %w", err)
		}
	}
	hs := &pb.HardState{Term: new(uint64(1)), Vote: new(uint64(0)), Commit: new(uint64(1))}
	if err := writeInitialState(n.store, hs, book, voters, core.NewStateMachine().Snapshot(), 1); err != nil {
		return fmt.Errorf("etcd: bootstrap: %w", err)
	}
	return nil
}

// deliver hands a received batch to the loop (transport.Config.Deliver).
func (n *Node) deliver(ctx context.Context, from transport.Sender, msgs []*pb.Message) error {
	select {
	case n.recvc <- inbound{from: from, msgs: msgs}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.done:
		return core.ErrStopped
	}
}

// Leader implements core.Consensus.
func (n *Node) Leader() (core.Member, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.view.leader, n.view.lead != raft.None
}

// Status implements core.Consensus; Backend is "etcd".
func (n *Node) Status() core.Status {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return core.Status{
		ID:           n.cfg.ID,
		Backend:      BackendName,
		Leader:       n.view.leader,
		Term:         n.view.term,
		CommitIndex:  n.view.commit,
		AppliedIndex: n.view.applied,
		Members:      slices.Clone(n.view.members),

		RecoveredCommitIndex: n.recovered,
	}
}

// leaderOnly returns a *core.NotLeaderError when this node is not the raft
// leader, or the stop error when it has stopped.
func (n *Node) leaderOnly() error {
	select {
	case <-n.done:
		return n.stoppedErr()
	default:
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.view.state != raft.StateLeader {
		return &core.NotLeaderError{Leader: n.view.leader}
	}
	return nil
}

// stoppedErr is core.ErrStopped, with the reason when the node failed.
func (n *Node) stoppedErr() error {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.fatal != nil {
		return fmt.Errorf("%w: %v", core.ErrStopped, n.fatal)
	}
	return core.ErrStopped
}

// Close implements core.Consensus: it stops the raft loop (waiters fail with
// core.ErrStopped), the transport, and the storage. It is idempotent; it
// returns the error that stopped the node, if one did, or a close error.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.stopc)
		<-n.done
		n.note.close()
		err := n.closeResources()
		n.mu.RLock()
		fatal := n.fatal
		n.mu.RUnlock()
		n.closeErr = errors.Join(fatal, err)
	})
	return n.closeErr
}

// closeResources closes what open opened, in reverse order.
func (n *Node) closeResources() error {
	n.snapWG.Wait() // a snapshot being written finishes with the store open
	var errs []error
	if n.tr != nil {
		errs = append(errs, n.tr.Close())
	}
	errs = append(errs, n.closeWatermark())
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	if n.db != nil {
		errs = append(errs, n.db.Close())
	}
	// badger flushes its memtable into a new table file on Close; the WAL
	// cuts new segments and snapshot files as it goes.
	errs = append(errs, backends.RestrictTree(n.cfg.DataDir))
	return errors.Join(errs...)
}

// member returns the member with raft id nid as far as the book knows.
func (n *Node) member(nid uint64) core.Member {
	if nid == raft.None {
		return core.Member{}
	}
	p, ok := n.book[nid]
	if !ok {
		return core.Member{ID: fmt.Sprintf("%x", nid)}
	}
	return core.Member{ID: p.ID, RaftAddr: p.RaftAddr, Voter: slices.Contains(n.confState.GetVoters(), nid)}
}

// refreshMembers rebuilds the member list of the status view from the
// configuration and the address book.
func (n *Node) refreshMembers() {
	var ms []core.Member
	for _, nid := range n.confState.GetVoters() {
		ms = append(ms, n.member(nid))
	}
	for _, nid := range n.confState.GetLearners() {
		m := n.member(nid)
		m.Voter = false
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b core.Member) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	n.members = ms
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	n.memberIDs.Store(&ids)
	n.gate.Refresh() // close the streams of members this change removed
}

// currentMemberIDs is the gate's source: the ids of the applied
// configuration's voters and learners, and whether open has read it yet.
func (n *Node) currentMemberIDs() ([]string, bool) {
	p := n.memberIDs.Load()
	if p == nil {
		return nil, false
	}
	return *p, true
}

// publish copies the loop's view into the status view.
func (n *Node) publish() {
	n.mu.Lock()
	n.view = statusView{
		term:    n.hs.GetTerm(),
		commit:  n.hs.GetCommit(),
		applied: n.applied,
		lead:    n.lead,
		state:   n.state,
		leader:  n.member(n.lead),
		members: n.members,
	}
	n.mu.Unlock()
}
