package transport

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// inbox collects what a transport delivers.
type inbox struct {
	mu      sync.Mutex
	msgs    []*pb.Message
	batches int
	from    []Sender
	block   chan struct{} // when non-nil, Deliver waits on it
	entered chan struct{} // signalled when Deliver starts waiting on block
	arrived chan struct{}
}

func newInbox() *inbox {
	return &inbox{arrived: make(chan struct{}, 1<<16), entered: make(chan struct{}, 1<<16)}
}

func (b *inbox) deliver(ctx context.Context, from Sender, msgs []*pb.Message) error {
	if b.block != nil {
		b.entered <- struct{}{}
		select {
		case <-b.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b.mu.Lock()
	b.msgs = append(b.msgs, msgs...)
	b.batches++
	b.from = append(b.from, from)
	b.mu.Unlock()
	for range msgs {
		b.arrived <- struct{}{}
	}
	return nil
}

func (b *inbox) wait(t *testing.T, n int) []*pb.Message {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-b.arrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d messages arrived", i, n)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*pb.Message(nil), b.msgs...)
}

func start(t *testing.T, id uint64, name string, in *inbox) *Transport {
	t.Helper()
	tr, err := New(Config{NodeID: id, ID: name, Addr: "127.0.0.1:1", BindAddr: "127.0.0.1:0", Deliver: in.deliver, QueueSize: 64})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	return tr
}

func msg(to uint64, typ pb.MessageType, index uint64) *pb.Message {
	return &pb.Message{Type: typ.Enum(), To: new(to), From: new(uint64(1)), Index: new(index)}
}

func TestSendDeliversInOrder(t *testing.T) {
	a, bIn := newInbox(), newInbox()
	ta := start(t, 1, "a", a)
	tb := start(t, 2, "b", bIn)
	ta.SetPeer(2, tb.Addr().String())
	for i := uint64(1); i <= 50; i++ {
		require.True(t, ta.Send(msg(2, pb.MsgApp, i)))
	}
	got := bIn.wait(t, 50)
	for i, m := range got {
		require.Equal(t, uint64(i+1), m.GetIndex())
		require.Equal(t, pb.MsgApp, m.GetType())
	}
	bIn.mu.Lock()
	require.LessOrEqual(t, bIn.batches, 50)
	require.Equal(t, Sender{ID: "a", Addr: "127.0.0.1:1"}, bIn.from[0])
	bIn.mu.Unlock()
}

func TestQueuedMessagesAreBatched(t *testing.T) {
	bIn := newInbox()
	ta := start(t, 1, "a", newInbox())
	tb := start(t, 2, "b", bIn)
	ta.SetPeer(2, tb.Addr().String())
	// Messages queued while the stream opens (a round trip) leave together.
	const n = 60 // within the test queue size of 64
	for i := uint64(1); i <= n; i++ {
		require.True(t, ta.Send(msg(2, pb.MsgApp, i)))
	}
	got := bIn.wait(t, n)
	for i, m := range got {
		require.Equal(t, uint64(i+1), m.GetIndex())
	}
	writes := ta.peers[2].writes.Load()
	require.Less(t, writes, int64(n/2), "%d writes for %d messages", writes, n)
}

func TestSendFailures(t *testing.T) {
	t.Run("unknown_peer", func(t *testing.T) {
		ta := start(t, 1, "a", newInbox())
		require.False(t, ta.Send(msg(9, pb.MsgApp, 1)))
	})
	t.Run("queue_full", func(t *testing.T) {
		bIn := newInbox()
		bIn.block = make(chan struct{})
		defer close(bIn.block)
		ta := start(t, 1, "a", newInbox())
		tb := start(t, 2, "b", bIn)
		ta.SetPeer(2, tb.Addr().String())
		ok := true
		for i := 0; i < 1000 && ok; i++ {
			ok = ta.Send(msg(2, pb.MsgApp, uint64(i)))
		}
		require.False(t, ok, "a full queue must refuse instead of blocking")
	})
	t.Run("peer_down_is_reported_unreachable", func(t *testing.T) {
		ta := start(t, 1, "a", newInbox())
		ta.SetPeer(2, closedAddr(t))
		require.True(t, ta.Send(msg(2, pb.MsgHeartbeat, 0)))
		select {
		case r := <-ta.Reports():
			require.Equal(t, Report{To: 2, Failed: true}, r)
		case <-time.After(10 * time.Second):
			t.Fatal("no unreachable report")
		}
	})
	t.Run("misdirected", func(t *testing.T) {
		ta := start(t, 1, "a", newInbox())
		cIn := newInbox()
		tc := start(t, 3, "c", cIn)
		ta.SetPeer(2, tc.Addr().String()) // node 3 answers at node 2's address
		require.True(t, ta.Send(msg(2, pb.MsgHeartbeat, 0)))
		select {
		case r := <-ta.Reports():
			require.Equal(t, Report{To: 2, Failed: true}, r)
		case <-time.After(10 * time.Second):
			t.Fatal("no unreachable report")
		}
		cIn.mu.Lock()
		defer cIn.mu.Unlock()
		require.Empty(t, cIn.msgs)
	})
}

func TestSnapshotOutcomeIsReported(t *testing.T) {
	bIn := newInbox()
	ta := start(t, 1, "a", newInbox())
	tb := start(t, 2, "b", bIn)
	ta.SetPeer(2, tb.Addr().String())
	snap := msg(2, pb.MsgSnap, 0)
	snap.Snapshot = &pb.Snapshot{Data: make([]byte, 3<<20), Metadata: &pb.SnapshotMetadata{Index: new(uint64(7)), Term: new(uint64(1))}}
	require.True(t, ta.Send(snap))
	select {
	case r := <-ta.Reports():
		require.Equal(t, Report{To: 2, Snapshot: true}, r)
	case <-time.After(10 * time.Second):
		t.Fatal("no snapshot report")
	}
	got := bIn.wait(t, 1)
	require.Equal(t, uint64(7), got[0].GetSnapshot().GetMetadata().GetIndex())

	ta.SetPeer(3, closedAddr(t))
	snap.To = new(uint64(3))
	require.True(t, ta.Send(snap))
	select {
	case r := <-ta.Reports():
		require.Equal(t, Report{To: 3, Snapshot: true, Failed: true}, r)
	case <-time.After(10 * time.Second):
		t.Fatal("no snapshot failure report")
	}
}

func TestDecodeBatch(t *testing.T) {
	m, err := proto.Marshal(msg(2, pb.MsgApp, 5))
	require.NoError(t, err)
	good := protowire.AppendVarint(nil, uint64(len(m)))
	good = append(good, m...)
	tests := []struct {
		name    string
		body    []byte
		want    int
		wantErr bool
	}{
		{"empty", nil, 0, false},
		{"one", good, 1, false},
		{"two", append(append([]byte{}, good...), good...), 2, false},
		{"cut", good[:len(good)-1], 0, true},
		{"garbage", append(protowire.AppendVarint(nil, 3), 0xff, 0xff, 0xff), 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeBatch(tt.body)
			if tt.wantErr {
				require.ErrorIs(t, err, ErrBadBatch)
				return
			}
			require.NoError(t, err)
			require.Len(t, got, tt.want)
		})
	}
}

func TestCloseIsIdempotentAndSendAfterCloseFails(t *testing.T) {
	tr, err := New(Config{NodeID: 1, ID: "a", Addr: "x", BindAddr: "127.0.0.1:0", Deliver: newInbox().deliver})
	require.NoError(t, err)
	tr.SetPeer(2, "127.0.0.1:1")
	require.NoError(t, tr.Close())
	require.NoError(t, tr.Close())
	require.False(t, tr.Send(msg(2, pb.MsgApp, 1)))
}

// TestCloseWaitsForAcceptedConnections: once Close returns, no goroutine
// of an accepted connection is left, not even an HTTP/1 connection that
// refused a batch without reading it, which net/http keeps open half a
// second after its answer (see connState).
func TestCloseWaitsForAcceptedConnections(t *testing.T) {
	before := goleak.IgnoreCurrent()
	tr, err := New(Config{NodeID: 2, ID: "b", Addr: "127.0.0.1:1", BindAddr: "127.0.0.1:0", Deliver: newInbox().deliver, MaxMessageBytes: 1 << 20})
	require.NoError(t, err)
	// A client that keeps connections alive: one that asks to close the
	// connection gets it closed at once, unread body or not.
	rt := &http.Transport{}
	defer rt.CloseIdleConnections()
	client := &http.Client{Transport: rt}
	req, err := http.NewRequest(http.MethodPost, "http://"+tr.Addr().String()+Path, bytes.NewReader(make([]byte, 2<<20)))
	require.NoError(t, err)
	req.Header.Set(headerTo, "2")
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.NoError(t, tr.Close())
	goleak.VerifyNone(t, before)
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
