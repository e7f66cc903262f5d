package etcd

import (
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends/etcd/internal/transport"
	"github.com/ticketd/ticketd/backends/internal/badgerlog"
	"github.com/ticketd/ticketd/core"
)

// loopState is the part of Node owned by the raft loop goroutine.
type loopState struct {
	book         addressBook
	confState    *pb.ConfState
	members      []core.Member
	hs           *pb.HardState // latest HardState seen (term, vote, commit)
	applied      uint64        // last index applied to the state machine
	snapIndex    uint64        // index of the latest snapshot in storage
	forceSnap    bool          // take a snapshot after this Ready (a node was added)
	snapping     bool          // a snapshot is being written (snapshot.go)
	snapBytes    uint64        // bytes of the latest snapshot's Data
	logBytes     uint64        // bytes of entry data applied since the latest snapshot started
	electionTick int
	ticks        uint64

	// Group commit (see holdProposals).
	holdTimer   *time.Timer
	holding     bool
	holdExpired bool
	answered    int // proposers answered since the loop last looked

	lead        uint64
	state       raft.StateType
	leaderTerm  uint64 // term in which this node became leader
	leaderReady bool   // an entry of leaderTerm has been applied (the barrier)
	lastEvent   eventKey

	pending map[uint64]*proposal // proposals in the log, by id

	readQueue   []*readRequest // waiting for the next ReadIndex request
	readFlight  *readBatch     // the ReadIndex request raft has not answered yet
	readWaiting []*readBatch   // answered, waiting for applied >= index
	readSeq     uint64

	confQueue   []*confRequest
	confPending *confRequest // proposed, not applied yet

	transfer *transferRequest

	failedSends []*pb.Message // sends that failed during a Ready, reported after Advance

	notices   commitNotices // the leader's empty MsgApps held back (commitnotice.go)
	noticeBuf []*pb.Message // scratch for sendNotices
	round     uint64        // loop rounds so far (commitnotice.go)

	progress progressTracker // followers' last contact (progress.go)
}

// eventKey is the part of a LeaderEvent that decides whether it is news.
type eventKey struct {
	lead     uint64
	isLeader bool
}

// inbound is one batch of messages received from a peer.
type inbound struct {
	from transport.Sender
	msgs []*pb.Message
}

// run is the raft loop (etcd raft doc.go): tick, step messages and proposals,
// and handle every Ready in order: persist, send, apply, advance.
func (n *Node) run() {
	defer close(n.done)
	defer func() {
		if r := recover(); r != nil {
			n.fail(fmt.Errorf("etcd: raft loop panic: %v", r))
		}
	}()
	ticker := time.NewTicker(n.cfg.HeartbeatInterval)
	defer ticker.Stop()
	n.holdTimer = time.NewTimer(time.Hour)
	n.holdTimer.Stop()
	defer n.holdTimer.Stop()
	for {
		n.round++
		// Received messages first: acknowledgements that arrived during the
		// last fsync commit entries without waiting behind the next batch's
		// fsync (select alone would pick a ready case at random).
		select {
		case in := <-n.recvc:
			n.step(in)
			if err := n.process(); err != nil {
				n.fail(err)
				return
			}
		default:
		}
		if n.answered > 1 {
			n.settleProposers(n.answered)
		}
		n.answered = 0
		propc, holdc := n.propc, (<-chan time.Time)(nil)
		if n.holdProposals() {
			propc, holdc = nil, n.holdTimer.C
		}
		if propc == nil || len(propc) == 0 {
			// No batch is about to be proposed to carry the commit
			// index: the held notices go now, before the loop waits.
			n.sendNotices(^uint64(0))
		}
		select {
		case <-n.stopc:
			n.failAll(core.ErrStopped)
			return
		case <-ticker.C:
			n.rn.Tick()
			n.ticks++
			n.onTick()
			n.reportProgress()
			if err := n.recordApplied(); err != nil {
				n.fail(err)
				return
			}
		case p := <-propc:
			n.propose(p)
		case <-holdc:
			n.holdExpired = true
		case in := <-n.recvc:
			n.step(in)
		case r := <-n.tr.Reports():
			n.onReport(r)
		case r := <-n.readc:
			n.readQueue = append(n.readQueue, r)
		drainReads:
			for {
				select {
				case r := <-n.readc:
					n.readQueue = append(n.readQueue, r)
				default:
					break drainReads
				}
			}
		case c := <-n.confc:
			n.confQueue = append(n.confQueue, c)
		case t := <-n.transc:
			n.startTransfer(t)
		case r := <-n.snapc:
			if err := n.onSnapshotDone(r); err != nil {
				n.fail(err)
				return
			}
		}
		if err := n.process(); err != nil {
			n.fail(err)
			return
		}
		n.sendNotices(n.round)
	}
}

// process issues queued conf changes and reads, then handles Readys until
// raft has nothing more.
func (n *Node) process() error {
	for {
		n.proposeConfChange()
		n.issueRead()
		if !n.rn.HasReady() {
			return nil
		}
		if err := n.handleReady(); err != nil {
			return err
		}
	}
}

// fail records a fatal error and tells Config.OnFatal, once: the node stops
// serving (fail-stop, docs/design.md#storage-and-recovery: an undecodable
// entry stops the node rather than fork the state; a storage write that
// failed, a full disk included, leaves the store not knowing what is on disk;
// a panicked raft loop must not leave a zombie that answers health checks).
// Every waiter fails with core.ErrStopped, and so does every later call, once
// the loop has exited.
func (n *Node) fail(err error) {
	err = badgerlog.DiskFull(err)
	n.log.Error("raft loop stopped", zap.Error(err))
	n.mu.Lock()
	first := n.fatal == nil
	if first {
		n.fatal = err
	}
	n.mu.Unlock()
	if first && n.cfg.OnFatal != nil {
		n.cfg.OnFatal(err)
	}
	n.failAll(fmt.Errorf("%w: %w", core.ErrStopped, err))
}

// failAll fails every waiter with err.
func (n *Node) failAll(err error) {
	for id, p := range n.pending {
		p.done <- proposalResult{err: err}
		delete(n.pending, id)
	}
	n.failReads(err)
	n.failWaitingReads(err)
	n.failConf(err)
	if n.transfer != nil {
		n.transfer.done <- err
		n.transfer = nil
	}
}

func (n *Node) failConf(err error) {
	for _, c := range n.confQueue {
		c.done <- err
	}
	n.confQueue = nil
	if n.confPending != nil {
		n.confPending.done <- err
		n.confPending = nil
	}
}

// notLeader is the error for work that needs the leader.
func (n *Node) notLeader() error {
	if n.state == raft.StateLeader {
		return &core.NotLeaderError{} // e.g. a leadership transfer is under way
	}
	return &core.NotLeaderError{Leader: n.member(n.lead)}
}

// step passes a received batch to raft. No address is ever taken from the
// batch's headers: replies go to the addresses of replicated membership
// (a joining node learns them through LearnPeers).
func (n *Node) step(first inbound) {
	in := first
	for i := 0; ; i++ {
		for _, m := range in.msgs {
			n.noteContact(m)
			if err := n.rn.Step(m); err != nil {
				n.log.Debug("step", zap.Stringer("type", m.GetType()), zap.Uint64("from", m.GetFrom()), zap.Error(err))
			}
		}
		if i == maxRecvBatch {
			return
		}
		select {
		case in = <-n.recvc:
		default:
			return
		}
	}
}

// onReport passes a transport outcome to raft.
func (n *Node) onReport(r transport.Report) {
	switch {
	case r.Snapshot && r.Failed:
		n.rn.ReportSnapshot(r.To, raft.SnapshotFailure)
	case r.Snapshot:
		n.rn.ReportSnapshot(r.To, raft.SnapshotFinish)
	case r.Failed:
		n.rn.ReportUnreachable(r.To)
	}
}

// onTick retries a ReadIndex request raft has not answered within an
// election timeout and notices an aborted leadership transfer.
func (n *Node) onTick() {
	if b := n.readFlight; b != nil && n.ticks-b.issued > uint64(n.electionTick) {
		n.readQueue = append(b.reqs, n.readQueue...)
		n.readFlight = nil
	}
	n.checkTransfer()
}

// handleReady processes one Ready as etcd raft's doc.go prescribes.
func (n *Node) handleReady() error {
	rd := n.rn.Ready()
	if rd.SoftState != nil {
		n.onSoftState(rd.SoftState)
	}
	// Step 2 may overlap step 1 for messages that do not acknowledge this
	// Ready's state (Raft thesis §10.2.1: the leader writes its log in
	// parallel with replicating it): MsgApp, heartbeats and snapshots go out
	// before the fsync. Votes and append acknowledgements (raft's
	// msgsAfterAppend), and everything when the term or vote changed, go after.
	termChanged := rd.HardState != nil && (rd.HardState.GetTerm() != n.hs.GetTerm() || rd.HardState.GetVote() != n.hs.GetVote())
	var after []*pb.Message
	mayHold := n.state == raft.StateLeader
	for _, m := range rd.Messages {
		if termChanged || needsDurableState(m.GetType()) {
			after = append(after, m)
			continue
		}
		n.sendOrHold(m, mayHold)
	}
	// Step 3 before step 1 on the leader when there is no snapshot:
	// committed entries are durable on a quorum already, so applying them
	// need not wait for this Ready's fsync of newer entries (their
	// proposers are answered a whole fsync earlier under load). A follower
	// answers no proposer: it applies after its acknowledgements are sent,
	// as etcd raft's doc.go orders it, so that its apply never delays the
	// acknowledgement of the entries that arrived with the commit index
	// (commitnotice.go: under load they arrive in one message).
	applied := false
	if raft.IsEmptySnap(rd.Snapshot) && n.state == raft.StateLeader {
		if err := n.applyEntries(rd.CommittedEntries); err != nil {
			return err
		}
		applied = true
	}
	// Step 1: persist HardState, entries and snapshot in one synced batch,
	// and the new end of the log in the watermark once it is durable.
	if err := n.lowerWatermark(rd.Entries); err != nil {
		return err
	}
	saveStart := time.Now()
	if err := n.store.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
		return fmt.Errorf("etcd: save ready: %w", err)
	}
	if len(rd.Entries) > 0 || !raft.IsEmptySnap(rd.Snapshot) {
		if err := n.raiseWatermark(); err != nil {
			return err
		}
		if n.cfg.Observer != nil && len(rd.Entries) > 0 {
			n.cfg.Observer.LogAppended(len(rd.Entries), time.Since(saveStart))
		}
	}
	if rd.HardState != nil {
		n.hs = rd.HardState
	}
	n.noteConfProposal(rd.Entries)
	for _, m := range after {
		n.sendOrHold(m, false)
	}
	// Step 3: apply the snapshot and the committed entries.
	if !applied {
		if !raft.IsEmptySnap(rd.Snapshot) {
			if err := n.applySnapshot(rd.Snapshot); err != nil {
				return err
			}
		}
		if err := n.applyEntries(rd.CommittedEntries); err != nil {
			return err
		}
	}
	for _, rs := range rd.ReadStates {
		n.onReadState(rs)
	}
	// Step 4.
	n.rn.Advance(rd)
	for _, m := range n.failedSends {
		if m.GetType() == pb.MsgSnap {
			n.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
		} else {
			n.rn.ReportUnreachable(m.GetTo())
		}
	}
	clear(n.failedSends)
	n.failedSends = n.failedSends[:0]
	n.releaseReads()
	if err := n.maybeSnapshot(); err != nil {
		return err
	}
	n.publish()
	return nil
}

// needsDurableState reports whether a message of type t may only be sent once
// the Ready's state is durable (the types etcd raft puts in msgsAfterAppend).
func needsDurableState(t pb.MessageType) bool {
	return t == pb.MsgAppResp || t == pb.MsgVoteResp || t == pb.MsgPreVoteResp
}

// send hands m to the transport, or records it as failed (reported to raft
// after Advance) when the DropMessage hook partitions it away or the
// transport cannot queue it.
func (n *Node) send(m *pb.Message) {
	if n.cfg.DropMessage != nil && n.cfg.DropMessage(n.cfg.ID, n.book[m.GetTo()].ID) {
		n.failedSends = append(n.failedSends, m)
		return
	}
	if !n.tr.Send(m) {
		n.failedSends = append(n.failedSends, m)
	}
}

// onSoftState tracks leadership. Losing it fails every proposal, read and
// conf change that needs the leader with *core.NotLeaderError.
func (n *Node) onSoftState(ss *raft.SoftState) {
	wasLeader := n.state == raft.StateLeader
	n.lead, n.state = ss.Lead, ss.RaftState
	term := n.rn.BasicStatus().GetTerm()
	switch {
	case wasLeader && n.state != raft.StateLeader:
		n.leaderReady = false
		err := n.notLeader()
		for id, p := range n.pending {
			p.done <- proposalResult{err: err}
			delete(n.pending, id)
		}
		n.failReads(err)
		n.failConf(err)
	case !wasLeader && n.state == raft.StateLeader:
		n.leaderTerm, n.leaderReady = term, false
	}
	n.checkTransfer()
	n.emitLeader(term)
}

// emitLeader queues a LeaderEvent when the (leader, is-ready-leader) pair
// changed. While this node leads but has not applied its barrier, nothing is
// said: IsLeader=true waits for the barrier
// (docs/design.md#the-consensus-contract; Raft thesis §6.4).
func (n *Node) emitLeader(term uint64) {
	if n.state == raft.StateLeader && !n.leaderReady {
		return
	}
	key := eventKey{lead: n.lead, isLeader: n.state == raft.StateLeader}
	if key == n.lastEvent {
		return
	}
	n.lastEvent = key
	n.note.push(core.LeaderEvent{IsLeader: key.isLeader, Leader: n.member(n.lead), Term: term})
}
