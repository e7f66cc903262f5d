package hashicorp

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/core"
)

// wire encodes one request as NetworkTransport sends it: type byte, msgpack.
func wire(t *testing.T, rpcType byte, req any, newTime bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteByte(rpcType)
	mp := &codec.MsgpackHandle{}
	mp.TimeNotBuiltin = !newTime // as NetworkTransport sets it
	if err := codec.NewEncoder(&buf, mp).Encode(req); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func hdr() raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n1"), Addr: []byte("127.0.0.1:7101")}
}

// TestFramerFollowsRequests: the framer finds the end of every kind of
// request raft sends, whatever the chunking, including InstallSnapshot's
// data (Size bytes after its header) and times in both of raft's formats.
func TestFramerFollowsRequests(t *testing.T) {
	t.Parallel()
	data := bytes.Repeat([]byte("snapshot"), 1000)
	for _, newTime := range []bool{false, true} {
		var stream []byte
		entries := []*raft.Log{
			{Index: 7, Term: 2, Type: raft.LogCommand, Data: bytes.Repeat([]byte("d"), 300), AppendedAt: time.Unix(1700000000, 5)},
			{Index: 8, Term: 2, Type: raft.LogNoop, Extensions: []byte{1, 2}},
		}
		stream = append(stream, wire(t, 0, &raft.AppendEntriesRequest{RPCHeader: hdr(), Term: 2, PrevLogEntry: 6, PrevLogTerm: 2, Entries: entries, LeaderCommitIndex: 6}, newTime)...)
		stream = append(stream, wire(t, 1, &raft.RequestVoteRequest{RPCHeader: hdr(), Term: 3, LastLogIndex: 8, LastLogTerm: 2}, newTime)...)
		stream = append(stream, wire(t, 2, &raft.InstallSnapshotRequest{RPCHeader: hdr(), SnapshotVersion: 1, Term: 3, LastLogIndex: 9, LastLogTerm: 3, Configuration: []byte("cfg"), Size: int64(len(data))}, newTime)...)
		stream = append(stream, data...)
		stream = append(stream, wire(t, 3, &raft.TimeoutNowRequest{RPCHeader: hdr()}, newTime)...)
		stream = append(stream, wire(t, 4, &raft.RequestPreVoteRequest{RPCHeader: hdr(), Term: 4, LastLogIndex: 9, LastLogTerm: 3}, newTime)...)
		stream = append(stream, wire(t, 0, &raft.AppendEntriesRequest{RPCHeader: hdr(), Term: 4}, newTime)...)
		for _, chunk := range []int{1, 3, 7, 64, 4096, len(stream)} {
			f := &msgFramer{maxMessage: 1 << 20, maxSnapshot: 1 << 20}
			starts, snaps := 0, 0
			for rest := stream; len(rest) > 0; {
				n := min(chunk, len(rest))
				started, snapshot, size, err := f.feed(rest[:n])
				if err != nil {
					t.Fatalf("new time %v, chunk %d: %v", newTime, chunk, err)
				}
				if started {
					starts++
				}
				if snapshot {
					snaps++
					if size != int64(len(data)) {
						t.Errorf("snapshot size %d, want %d", size, len(data))
					}
				}
				rest = rest[n:]
			}
			if !f.idle() {
				t.Errorf("new time %v, chunk %d: framer not at a request boundary at the end", newTime, chunk)
			}
			if chunk == 1 && (starts != 6 || snaps != 1) {
				t.Errorf("new time %v: %d requests and %d snapshots seen, want 6 and 1", newTime, starts, snaps)
			}
		}
	}
}

// TestFramerRefuses: requests past the bounds are refused from their
// declared lengths, before their bytes arrive.
func TestFramerRefuses(t *testing.T) {
	t.Parallel()
	big := wire(t, 0, &raft.AppendEntriesRequest{RPCHeader: hdr(), Term: 2, Entries: []*raft.Log{{Index: 1, Term: 2, Data: make([]byte, 2<<20)}}}, false)
	cases := []struct {
		name string
		wire []byte
	}{
		{"field_over_rpc_bound", big[:len(big)-(2<<20)+16]}, // the header declares 2 MiB; 16 bytes sent
		{"snapshot_over_its_bound", wire(t, 2, &raft.InstallSnapshotRequest{RPCHeader: hdr(), Term: 3, Size: 9 << 20}, false)},
		{"negative_snapshot_size", wire(t, 2, &raft.InstallSnapshotRequest{RPCHeader: hdr(), Term: 3, Size: -1}, false)},
		{"malformed", []byte{0, 0xc1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &msgFramer{maxMessage: 1 << 20, maxSnapshot: 8 << 20}
			if _, _, _, err := f.feed(tc.wire); !errors.Is(err, ErrMessageTooLarge) {
				t.Fatalf("feed = %v, want ErrMessageTooLarge", err)
			}
		})
	}
}

// TestRPCMessageBound: the longest entry core accepts fits maxEntryBytes
// with room to spare, so rpcMessageBytes holds maxAppendEntries of them twice.
func TestRPCMessageBound(t *testing.T) {
	cmd := core.Grant(strings.Repeat("k", core.MaxKeyBytes), 1<<40, strings.Repeat("o", core.MaxOwnerBytes))
	cmd.Principal = strings.Repeat("p", core.MaxPrincipalBytes)
	cmd.LockDelayMS, cmd.Session, cmd.Limit = 1<<40, 1<<60, 1<<30
	b, err := core.Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	entry := wire(t, 0, &raft.Log{Index: 1 << 60, Term: 1 << 60, Type: raft.LogCommand, Data: b, AppendedAt: time.Now()}, true)
	if len(entry) > maxEntryBytes/2 {
		t.Errorf("longest entry is %d bytes on the wire, more than half of maxEntryBytes %d", len(entry), maxEntryBytes)
	}
	t.Logf("longest entry: %d bytes on the wire; rpcMessageBytes %d", len(entry), rpcMessageBytes)
}
