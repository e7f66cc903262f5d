package etcd

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"

	"go.etcd.io/raft/v3"

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
