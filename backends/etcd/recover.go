package etcd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/internal/watermark"
	"github.com/ticketd/ticketd/core"
)

// restoreTerm is the term of a restored cluster's initial snapshot: a new
// cluster starts its terms again; the token counter, not the term, is what
// must keep growing.
const restoreTerm = 1

var _ backends.RestoreFunc = Restore

// Restore creates in cfg.DataDir, which must hold no Raft state, the data of
// one member of a new cluster whose voters are cfg.Bootstrap: a snapshot at
// backends.LoadRestore's Index and term 1 holding the lock table read from
// snapshot, the voters' addresses and a ConfState listing them, as etcdutl
// snapshot restore writes a new member's WAL and snap dir. Run it for every
// member with the same snapshot and the same Bootstrap; then start them with
// New.
//
// Errors: backends.ErrInvalidConfig (no Bootstrap, or Validate's),
// backends.ErrDataDirInUse, ErrMemberIDConflict, core.ErrDecode for a
// damaged snapshot, or the storage's. Not safe to run concurrently with a
// node on the same dir.
func Restore(cfg backends.Config, snapshot io.Reader) error {
	cfg, err := backends.ValidateRestore(cfg)
	if err != nil {
		return err
	}
	st, err := backends.LoadRestore(snapshot)
	if err != nil {
		return err
	}
	book, voters, err := bootstrapBook(cfg.Bootstrap)
	if err != nil {
		return err
	}
	if err := backends.PrepareDataDir(cfg.DataDir); err != nil {
		return err
	}
	store, db, err := openStorage(cfg, cfg.Logger)
	if err != nil {
		return err
	}
	hs := &pb.HardState{Term: new(uint64(restoreTerm)), Vote: new(uint64(raft.None)), Commit: new(st.Index)}
	errs := []error{writeInitialState(store, hs, book, voters, bytes.NewReader(st.Snapshot), st.Index)}
	errs = append(errs, store.Close())
	if err := errors.Join(errs...); err == nil {
		// New refuses Raft state without a watermark beside it.
		errs = append(errs, watermark.Create(cfg.DataDir, watermark.Mark{LastIndex: st.Index}))
	}
	if db != nil {
		if err := db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("etcd: restore: close badger: %w", err))
		}
	}
	errs = append(errs, backends.RestrictTree(cfg.DataDir))
	return errors.Join(errs...)
}

// bootstrapBook returns the address book and the sorted raft ids of members.
// Errors: ErrMemberIDConflict when two ids hash to one raft id.
func bootstrapBook(members []core.Member) (addressBook, []uint64, error) {
	book := addressBook{}
	var voters []uint64
	for _, m := range members {
		nid := raftID(m.ID)
		if p, ok := book[nid]; ok && p.ID != m.ID {
			return nil, nil, fmt.Errorf("%w: %q and %q", ErrMemberIDConflict, p.ID, m.ID)
		}
		book[nid] = peerInfo{ID: m.ID, RaftAddr: m.RaftAddr}
		voters = append(voters, nid)
	}
	slices.Sort(voters)
	return book, slices.Compact(voters), nil
}

// writeInitialState saves, as one batch, a snapshot at index (term
// hs.Term) whose Data holds book and sm and whose ConfState lists voters,
// with hs; it replaces whatever log the store held. Then it saves book as
// the address book. This is the shape etcd raft's doc recommends for a new
// cluster ("a Storage that has a first index > 1 and which stores the
// desired ConfState").
func writeInitialState(store raftStorage, hs *pb.HardState, book addressBook, voters []uint64, sm io.WriterTo, index uint64) error {
	data, err := encodeSnapshotData(book, sm)
	if err != nil {
		return err
	}
	snap := &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{
		Index: new(index), Term: new(hs.GetTerm()),
		ConfState: &pb.ConfState{Voters: voters},
	}}
	if err := store.Save(hs, nil, snap); err != nil {
		return fmt.Errorf("etcd: initial state: %w", err)
	}
	if err := store.SavePeers(book.encode()); err != nil {
		return fmt.Errorf("etcd: initial state: %w", err)
	}
	return nil
}

// forceNewCluster rewrites the node's stored state into that of a new
// cluster with this node as its only voter (Config.ForceNewCluster), as
// etcd's --force-new-cluster does: every entry in the log, committed or
// not, is applied to a scratch state machine restored from the latest
// snapshot; then a snapshot of it at one past the last index, in the
// current term, with ConfState {this node} and an address book naming
// only this node, replaces the log. The durable watermark (package
// watermark) accepts it: the new snapshot ends after every index the log
// ever held. Errors: backends.ErrNoState, core.ErrDecode for an
// undecodable entry or snapshot, or the store's.
func (n *Node) forceNewCluster() error {
	if n.store.IsEmpty() {
		return fmt.Errorf("%w: %s", backends.ErrNoState, n.cfg.DataDir)
	}
	sm := core.NewStateMachine()
	snap, _ := n.store.Snapshot()
	from := snap.GetMetadata().GetIndex() + 1
	if !raft.IsEmptySnap(snap) {
		_, state, err := decodeSnapshotData(snap.GetData())
		if err != nil {
			return fmt.Errorf("etcd: force new cluster: snapshot: %w", err)
		}
		if err := sm.Restore(bytes.NewReader(state)); err != nil {
			return fmt.Errorf("etcd: force new cluster: snapshot: %w", err)
		}
		sm.Skip(from - 1)
	}
	last, _ := n.store.LastIndex()
	if last >= from {
		ents, err := n.store.Entries(from, last+1, math.MaxUint64)
		if err != nil {
			return fmt.Errorf("etcd: force new cluster: read log: %w", err)
		}
		for _, e := range ents {
			if e.GetType() != pb.EntryNormal || len(e.GetData()) == 0 {
				sm.Skip(e.GetIndex())
				continue
			}
			_, payload, err := decodeEntry(e.GetData())
			if err != nil {
				return fmt.Errorf("etcd: force new cluster: index %d: %w", e.GetIndex(), err)
			}
			if _, _, err := sm.ApplyEntry(e.GetIndex(), payload); err != nil {
				return fmt.Errorf("etcd: force new cluster: %w", err)
			}
		}
	}
	index := max(last, from-1) + 1
	sm.Skip(index)
	hs, _, _ := n.store.InitialState()
	term := max(hs.GetTerm(), 1)
	newHS := &pb.HardState{Term: new(term), Vote: new(hs.GetVote()), Commit: new(index)}
	book := addressBook{n.id: {ID: n.cfg.ID, RaftAddr: n.cfg.RaftAddr}}
	if err := writeInitialState(n.store, newHS, book, []uint64{n.id}, sm.Snapshot(), index); err != nil {
		return err
	}
	n.log.Warn("forced a new one-member cluster from this node's data",
		zap.Uint64("index", index), zap.Uint64("term", term), zap.Uint64("last_token", sm.LastToken()))
	return nil
}
