package etcd

import (
	"bytes"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/core"
)

// applyEntries applies committed entries in log order: commands to the state
// machine (then OnApply and the proposer's waiter), configuration changes to
// raft and the address book. It notices the leader's barrier: the first
// applied entry of the term this node leads in (etcd raft appends an empty
// one on election), after which every earlier entry is applied.
func (n *Node) applyEntries(ents []*pb.Entry) error {
	if n.cfg.Observer != nil && len(ents) > 0 {
		defer func(start time.Time) { n.cfg.Observer.Applied(len(ents), time.Since(start)) }(time.Now())
	}
	for _, e := range ents {
		idx := e.GetIndex()
		if idx <= n.applied {
			continue
		}
		n.logBytes += uint64(len(e.GetData()))
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
// raft received from the leader (already saved by Save), then calls
// OnRestore; the loop applies the Ready's committed entries only after it.
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
	n.snapBytes, n.logBytes = uint64(len(snap.GetData())), 0
	n.log.Info("restored snapshot", zap.Uint64("index", idx))
	if fn := n.cfg.OnRestore; fn != nil {
		fn(n.sm.AppliedIndex())
	}
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
