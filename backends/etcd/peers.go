package etcd

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/ticketd/ticketd/backends/etcd/internal/transport"
	"github.com/ticketd/ticketd/core"
)

// raftID derives the etcd raft node id of member id: FNV-64a of the id,
// never 0 (raft.None) nor one of raft's local message targets. It is stable
// across restarts and the same on every node.
func raftID(id string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	v := h.Sum64()
	if v == raft.None || raft.IsLocalMsgTarget(v) {
		v = 1
	}
	return v
}

// peerInfo is what the address book knows of one member, and what a
// ConfChange's Context carries.
type peerInfo struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
}

// encodeContext is the ConfChange.Context of a change for member p: its JSON.
func encodeContext(p peerInfo) []byte {
	b, _ := json.Marshal(p) // two strings: cannot fail
	return b
}

// decodeContext parses a ConfChange.Context written by encodeContext.
func decodeContext(b []byte) (peerInfo, error) {
	var p peerInfo
	if err := json.Unmarshal(b, &p); err != nil {
		return peerInfo{}, fmt.Errorf("%w: conf change context: %v", core.ErrDecode, err)
	}
	return p, nil
}

// addressBook maps raft node ids to members. It is owned by the raft loop.
type addressBook map[uint64]peerInfo

type bookRecord struct {
	NodeID   uint64 `json:"node_id"`
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
}

// encode returns the book as a JSON list sorted by node id (deterministic).
func (b addressBook) encode() []byte {
	recs := make([]bookRecord, 0, len(b))
	for nid, p := range b {
		recs = append(recs, bookRecord{NodeID: nid, ID: p.ID, RaftAddr: p.RaftAddr})
	}
	slices.SortFunc(recs, func(x, y bookRecord) int { return cmp.Compare(x.NodeID, y.NodeID) })
	out, _ := json.Marshal(recs) // strings and numbers: cannot fail
	return out
}

// decodeBook parses what encode wrote.
func decodeBook(data []byte) (addressBook, error) {
	var recs []bookRecord
	if err := json.Unmarshal(data, &recs); err != nil {
		return nil, fmt.Errorf("%w: address book: %v", ErrCorrupt, err)
	}
	b := make(addressBook, len(recs))
	for _, r := range recs {
		b[r.NodeID] = peerInfo{ID: r.ID, RaftAddr: r.RaftAddr}
	}
	return b, nil
}

// clone returns a copy of b.
func (b addressBook) clone() addressBook {
	out := make(addressBook, len(b))
	for k, v := range b {
		out[k] = v
	}
	return out
}

// joinRoute decides whether a received batch may give its sender an address,
// and which. The address book comes only from replicated membership: the
// bootstrap snapshot, ConfChange contexts and the leader's snapshots. A
// sender's own headers are never believed by a node that is in a
// configuration: a forged Ticketd-Raft-From-Addr cannot re-route a member's
// stream (issue 12's hijack). The one exception is a node in no
// configuration yet (an empty ConfState: a joiner before the leader's
// snapshot reaches it), which must answer the leader to get that snapshot;
// it routes replies to the address the sender claims, for a sender it does
// not know, until the snapshot's book replaces the whole book. With
// PeerTLS the claim comes from a peer whose certificate the handshake
// verified. The route is keyed by the raft id the messages carry, which must
// be the id derived from the claimed member id.
func joinRoute(cs *pb.ConfState, book addressBook, from transport.Sender, msgs []*pb.Message) (uint64, peerInfo, bool) {
	if len(cs.GetVoters()) > 0 || len(cs.GetLearners()) > 0 || len(msgs) == 0 || from.ID == "" || from.Addr == "" {
		return 0, peerInfo{}, false
	}
	nid := msgs[0].GetFrom()
	if raftID(from.ID) != nid {
		return 0, peerInfo{}, false
	}
	if _, ok := book[nid]; ok {
		return 0, peerInfo{}, false
	}
	return nid, peerInfo{ID: from.ID, RaftAddr: from.Addr}, true
}
