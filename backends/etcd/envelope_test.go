package etcd

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"

	"github.com/ticketd/ticketd/core"
)

func TestEntryEnvelope(t *testing.T) {
	payload, err := core.Encode(core.Grant("k", 1000, "o"))
	require.NoError(t, err)
	data, err := encodeEntry(core.Grant("k", 1000, "o"))
	require.NoError(t, err)
	setEntryID(data, 0xdeadbeef01020304)
	id, got, err := decodeEntry(data)
	require.NoError(t, err)
	require.Equal(t, uint64(0xdeadbeef01020304), id)
	require.Equal(t, payload, got)

	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"short", []byte{entryVersion, 1, 2}},
		{"unknown_version", append([]byte{entryVersion + 1}, data[1:]...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := decodeEntry(tt.data)
			require.ErrorIs(t, err, core.ErrDecode)
		})
	}
}

func TestSnapshotEnvelope(t *testing.T) {
	sm := core.NewStateMachine()
	_, err := sm.Apply(1, core.Grant("k", 1000, "o"))
	require.NoError(t, err)
	book := addressBook{raftID("a"): {ID: "a", RaftAddr: "h:1"}, raftID("b"): {ID: "b", RaftAddr: "h:2"}}
	data, err := encodeSnapshotData(book, sm.Snapshot())
	require.NoError(t, err)
	gotBook, state, err := decodeSnapshotData(data)
	require.NoError(t, err)
	require.Equal(t, book, gotBook)
	restored := core.NewStateMachine()
	require.NoError(t, restored.Restore(bytes.NewReader(state)))
	require.Equal(t, uint64(1), restored.LastToken())

	for _, bad := range [][]byte{nil, {snapshotVersion + 1}, {snapshotVersion, 50, '['}} {
		_, _, err := decodeSnapshotData(bad)
		require.ErrorIs(t, err, core.ErrDecode)
	}
}

func TestRaftID(t *testing.T) {
	require.Equal(t, raftID("n1"), raftID("n1"), "stable")
	require.NotEqual(t, raftID("n1"), raftID("n2"))
	for _, id := range []string{"", "n1", "a-very-long-member-name"} {
		v := raftID(id)
		require.NotEqual(t, uint64(raft.None), v)
		require.False(t, raft.IsLocalMsgTarget(v))
	}
}

func TestContextAndBook(t *testing.T) {
	p := peerInfo{ID: "n1", RaftAddr: "127.0.0.1:7101"}
	got, err := decodeContext(encodeContext(p))
	require.NoError(t, err)
	require.Equal(t, p, got)
	_, err = decodeContext([]byte("{"))
	require.ErrorIs(t, err, core.ErrDecode)

	book := addressBook{2: {ID: "b", RaftAddr: "h:2"}, 1: {ID: "a", RaftAddr: "h:1"}}
	require.Equal(t, `[{"node_id":1,"id":"a","raft_addr":"h:1"},{"node_id":2,"id":"b","raft_addr":"h:2"}]`, string(book.encode()))
	back, err := decodeBook(book.encode())
	require.NoError(t, err)
	require.Equal(t, book, back)
	_, err = decodeBook([]byte("nope"))
	require.ErrorIs(t, err, ErrCorrupt)
}
