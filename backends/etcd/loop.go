package etcd

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/backends/etcd/internal/transport"
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

// readBatch is a set of readers served by one raft ReadIndex request.
type readBatch struct {
	seq    uint64
	reqs   []*readRequest
	issued uint64 // tick count when sent
	index  uint64
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
		select {
		case <-n.stopc:
			n.failAll(core.ErrStopped)
			return
		case <-ticker.C:
			n.rn.Tick()
			n.ticks++
			n.onTick()
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
		}
		if err := n.process(); err != nil {
			n.fail(err)
			return
		}
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

// fail records a fatal error: the node stops serving (DESIGN.md: an
// undecodable entry stops the node rather than fork the state).
func (n *Node) fail(err error) {
	n.log.Error("raft loop stopped", zap.Error(err))
	n.mu.Lock()
	n.fatal = err
	n.mu.Unlock()
	n.failAll(fmt.Errorf("%w: %v", core.ErrStopped, err))
}

// failAll fails every waiter with err.
func (n *Node) failAll(err error) {
	for id, p := range n.pending {
		p.done <- proposalResult{err: err}
		delete(n.pending, id)
	}
	n.failReads(err)
	for _, b := range n.readWaiting {
		for _, r := range b.reqs {
			r.done <- err
		}
	}
	n.readWaiting = nil
	n.failConf(err)
	if n.transfer != nil {
		n.transfer.done <- err
		n.transfer = nil
	}
}

func (n *Node) failReads(err error) {
	for _, r := range n.readQueue {
		r.done <- err
	}
	n.readQueue = nil
	if n.readFlight != nil {
		for _, r := range n.readFlight.reqs {
			r.done <- err
		}
		n.readFlight = nil
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

// maxHold bounds how long new proposals wait for the batch in flight.
const maxHold = 2 * time.Millisecond

// holdProposals reports whether the leader keeps new proposals queued because
// an earlier batch is still uncommitted (group commit, as hashicorp's leader
// does with one dispatch at a time): the proposers answered when it applies
// join those queued meanwhile in one batch — one fsync on every node instead
// of a trickle of small ones. A single proposer never waits (nothing is in
// flight when it proposes), and no hold outlasts maxHold.
func (n *Node) holdProposals() bool {
	hold := n.state == raft.StateLeader && len(n.pending) > 0 && !n.holdExpired
	switch {
	case hold && !n.holding:
		n.holding = true
		n.holdTimer.Reset(maxHold)
	case !hold && n.holding:
		n.holding = false
		n.holdTimer.Stop()
	}
	if len(n.pending) == 0 {
		n.holdExpired = false
	}
	return hold
}

// settleProposers gives the k proposers just answered a moment to propose
// again before the loop takes the next batch: yielding the processor until
// k proposals are queued or the queue stops growing (a few yields, not a
// timer), so they leave in one batch instead of the first comer's alone.
func (n *Node) settleProposers(k int) {
	for i, still := 0, 0; i < 64 && len(n.propc) < k && still < 4; i++ {
		l := len(n.propc)
		runtime.Gosched()
		if len(n.propc) == l {
			still++
		} else {
			still = 0
		}
	}
}

// propose drains every waiting proposal and hands them to raft as one MsgProp
// (one log append, one fsync, one MsgApp per follower).
func (n *Node) propose(first *proposal) {
	batch := []*proposal{first}
drain:
	for len(batch) < maxProposalBatch {
		select {
		case p := <-n.propc:
			batch = append(batch, p)
		default:
			break drain
		}
	}
	if n.state != raft.StateLeader {
		err := n.notLeader()
		for _, p := range batch {
			p.done <- proposalResult{err: err}
		}
		return
	}
	ents := make([]*pb.Entry, 0, len(batch))
	live := batch[:0]
	for _, p := range batch {
		if p.ctx.Err() != nil {
			continue // its caller has gone: do not replicate it
		}
		ents = append(ents, &pb.Entry{Data: p.data})
		live = append(live, p)
	}
	if len(ents) == 0 {
		return
	}
	err := n.rn.Step(&pb.Message{Type: pb.MsgProp.Enum(), From: new(n.id), Entries: ents})
	if err != nil {
		n.log.Debug("proposal dropped", zap.Int("entries", len(ents)), zap.Error(err))
		nl := n.notLeader()
		for _, p := range live {
			p.done <- proposalResult{err: nl}
		}
		return
	}
	for _, p := range live {
		n.pending[p.id] = p
	}
}

// step passes a received batch to raft, learning the sender's address when
// the book does not have it yet (a joining node must answer the leader
// before it has the leader's snapshot).
func (n *Node) step(first inbound) {
	in := first
	for i := 0; ; i++ {
		if len(in.msgs) > 0 && in.from.ID != "" && in.from.Addr != "" {
			from := in.msgs[0].GetFrom()
			if raftID(in.from.ID) == from {
				if p, ok := n.book[from]; !ok || p.RaftAddr != in.from.Addr {
					n.book[from] = peerInfo{ID: in.from.ID, RaftAddr: in.from.Addr}
					n.tr.SetPeer(from, in.from.Addr)
				}
			}
		}
		for _, m := range in.msgs {
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
	for _, m := range rd.Messages {
		if termChanged || needsDurableState(m.GetType()) {
			after = append(after, m)
			continue
		}
		n.send(m)
	}
	// Step 3 before step 1 when there is no snapshot: committed entries are
	// durable on a quorum already, so applying them need not wait for this
	// Ready's fsync of newer entries (their proposers are answered a whole
	// fsync earlier under load).
	applied := false
	if raft.IsEmptySnap(rd.Snapshot) {
		if err := n.applyEntries(rd.CommittedEntries); err != nil {
			return err
		}
		applied = true
	}
	// Step 1: persist HardState, entries and snapshot in one synced batch.
	if err := n.store.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
		return fmt.Errorf("etcd: save ready: %w", err)
	}
	if rd.HardState != nil {
		n.hs = rd.HardState
	}
	n.noteConfProposal(rd.Entries)
	for _, m := range after {
		n.send(m)
	}
	// Step 3: apply the snapshot and the committed entries.
	if !applied {
		if err := n.applySnapshot(rd.Snapshot); err != nil {
			return err
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
// said: IsLeader=true waits for the barrier (DESIGN.md, Leases).
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

// applyEntries applies committed entries in log order: commands to the state
// machine (then OnApply and the proposer's waiter), configuration changes to
// raft and the address book. It notices the leader's barrier: the first
// applied entry of the term this node leads in (etcd raft appends an empty
// one on election), after which every earlier entry is applied.
func (n *Node) applyEntries(ents []*pb.Entry) error {
	for _, e := range ents {
		idx := e.GetIndex()
		if idx <= n.applied {
			continue
		}
		switch e.GetType() {
		case pb.EntryNormal:
			if len(e.GetData()) == 0 {
				n.sm.Skip(idx)
				break
			}
			id, payload, err := decodeEntry(e.GetData())
			if err != nil {
				return fmt.Errorf("etcd: apply index %d: %w", idx, err)
			}
			cmd, res, err := n.sm.ApplyEntry(idx, payload)
			if err != nil {
				return fmt.Errorf("etcd: %w", err)
			}
			if n.cfg.OnApply != nil {
				n.cfg.OnApply(idx, cmd, res)
			}
			if p, ok := n.pending[id]; ok {
				delete(n.pending, id)
				p.done <- proposalResult{res: res}
				n.answered++
			}
		case pb.EntryConfChange:
			cc := &pb.ConfChange{}
			if err := proto.Unmarshal(e.GetData(), cc); err != nil {
				return fmt.Errorf("etcd: apply index %d: %w: conf change: %v", idx, core.ErrDecode, err)
			}
			n.applyConfChange(cc)
			n.sm.Skip(idx)
		case pb.EntryConfChangeV2:
			cc := &pb.ConfChangeV2{}
			if err := proto.Unmarshal(e.GetData(), cc); err != nil {
				return fmt.Errorf("etcd: apply index %d: %w: conf change: %v", idx, core.ErrDecode, err)
			}
			n.confState = n.rn.ApplyConfChange(cc)
			n.refreshMembers()
			n.sm.Skip(idx)
		default:
			return fmt.Errorf("etcd: apply index %d: %w: entry type %v", idx, core.ErrDecode, e.GetType())
		}
		n.applied = idx
		if n.state == raft.StateLeader && !n.leaderReady && e.GetTerm() == n.leaderTerm {
			n.leaderReady = true
			n.emitLeader(n.leaderTerm)
		}
	}
	return nil
}

// applySnapshot restores the state machine and address book from a snapshot
// raft received from the leader (already saved by Save).
func (n *Node) applySnapshot(snap *pb.Snapshot) error {
	idx := snap.GetMetadata().GetIndex()
	book, state, err := decodeSnapshotData(snap.GetData())
	if err != nil {
		return fmt.Errorf("etcd: snapshot %d: %w", idx, err)
	}
	if err := n.sm.Restore(bytes.NewReader(state)); err != nil {
		return fmt.Errorf("etcd: restore snapshot %d: %w", idx, err)
	}
	n.sm.Skip(idx)
	book[n.id] = peerInfo{ID: n.cfg.ID, RaftAddr: n.cfg.RaftAddr}
	n.setBook(book)
	n.confState = proto.Clone(pb.EnsureConfState(snap.GetMetadata().GetConfState())).(*pb.ConfState)
	n.refreshMembers()
	n.applied, n.snapIndex = idx, idx
	n.log.Info("restored snapshot", zap.Uint64("index", idx))
	return nil
}

// setBook replaces the address book, the transport's peers and the persisted copy.
func (n *Node) setBook(book addressBook) {
	for nid := range n.book {
		if _, ok := book[nid]; !ok {
			n.tr.RemovePeer(nid)
		}
	}
	for nid, p := range book {
		n.tr.SetPeer(nid, p.RaftAddr)
	}
	n.book = book
	n.saveBook()
}

// saveBook persists the address book; a failure is logged (the book is
// rebuilt from snapshots and the log on restart anyway).
func (n *Node) saveBook() {
	if err := n.store.SavePeers(n.book.encode()); err != nil {
		n.log.Warn("save address book", zap.Error(err))
	}
}

// maybeSnapshot takes a snapshot of the state machine at the applied index
// once SnapshotThreshold entries were applied since the last one (or a node
// was just added, so the snapshot a joining node receives names it), and
// compacts the log, keeping TrailingLogs entries.
func (n *Node) maybeSnapshot() error {
	if n.applied <= n.snapIndex || (!n.forceSnap && n.applied-n.snapIndex < n.cfg.SnapshotThreshold) {
		return nil
	}
	n.forceSnap = false
	term, err := n.store.Term(n.applied)
	if err != nil {
		return fmt.Errorf("etcd: snapshot at %d: %w", n.applied, err)
	}
	data, err := encodeSnapshotData(n.book, n.sm.Snapshot())
	if err != nil {
		return err
	}
	snap := &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{
		Index: new(n.applied), Term: new(term),
		ConfState: proto.Clone(n.confState).(*pb.ConfState),
	}}
	var compactTo uint64
	if n.applied > n.cfg.TrailingLogs {
		compactTo = n.applied - n.cfg.TrailingLogs
	}
	if err := n.store.CreateSnapshot(snap, compactTo); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	n.snapIndex = n.applied
	n.log.Debug("snapshot", zap.Uint64("index", n.applied), zap.Uint64("compacted_to", compactTo), zap.Int("bytes", len(data)))
	return nil
}

// issueRead sends one raft ReadIndex request for every reader queued, when
// none is in flight.
func (n *Node) issueRead() {
	if n.readFlight != nil || len(n.readQueue) == 0 {
		return
	}
	if n.state != raft.StateLeader {
		n.failReads(n.notLeader())
		return
	}
	live := n.readQueue[:0]
	for _, r := range n.readQueue {
		if r.ctx.Err() == nil {
			live = append(live, r)
		}
	}
	n.readQueue = nil
	if len(live) == 0 {
		return
	}
	n.readSeq++
	var rctx [8]byte
	binary.BigEndian.PutUint64(rctx[:], n.readSeq)
	n.rn.ReadIndex(rctx[:])
	n.readFlight = &readBatch{seq: n.readSeq, reqs: live, issued: n.ticks}
}

// onReadState moves the batch raft answered to wait for its index to apply.
func (n *Node) onReadState(rs raft.ReadState) {
	b := n.readFlight
	if b == nil || len(rs.RequestCtx) != 8 || binary.BigEndian.Uint64(rs.RequestCtx) != b.seq {
		return
	}
	b.index = rs.Index
	n.readWaiting = append(n.readWaiting, b)
	n.readFlight = nil
}

// releaseReads answers every batch whose read index is applied.
func (n *Node) releaseReads() {
	kept := n.readWaiting[:0]
	for _, b := range n.readWaiting {
		if b.index > n.applied {
			kept = append(kept, b)
			continue
		}
		for _, r := range b.reqs {
			r.done <- nil
		}
	}
	clear(n.readWaiting[len(kept):])
	n.readWaiting = kept
}
