package server

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/forward"
	"github.com/ticketd/ticketd/server/snapfile"
)

// snapshotChunkBytes is the most snapshot data one SnapshotChunk carries
// (bytes), well under connect's default message limits.
const snapshotChunkBytes = 1 << 20

// Snapshot streams a consistent snapshot of the lock table (etcd's
// Maintenance.Snapshot): on the leader, after a ReadIndex (so it holds
// every write acknowledged before the call), the state machine's
// copy-on-write snapshot is written out, described by a
// ticket.v1.SnapshotHeader (snapfile.NewHeader: index, last token, SHA-256)
// sent in the first chunk, and streamed in chunks of at most 1 MiB. A
// follower forwards the call one hop and relays the leader's stream.
//
// Authorization: admin-only when authorization is on
// (docs/security.md#authorization): security's procedure table maps
// ticketv1connect.ClusterServiceSnapshotProcedure to the admin permission,
// and the interceptor checks it on the node the client called before this
// handler runs, so a follower relays only an admin's request. The relayed
// stream goes through the Forwarder's client, whose principal interceptor
// (forward/principal.go) carries the caller's identity on streams as on
// unary calls, so the leader checks the caller, never the follower's node
// identity (server/e2e/auth_stream_test.go).
//
// Errors (connect codes via errmap): Unavailable (no leader, shutting
// down), DeadlineExceeded/Canceled (ctx), or the stream's send error. A
// chunk the client does not take within limits.stream_write_timeout_ms
// resets the stream (httpapi, streamwrite.go), so a reader that stalls
// does not keep the snapshot copy for as long as its connection lives.
func (s *clusterService) Snapshot(ctx context.Context, req *ticketv1.SnapshotRequest, stream *connect.ServerStream[ticketv1.SnapshotChunk]) error {
	n := s.n
	leader, here, err := n.route(ctx)
	if err != nil {
		return n.toConnect(err)
	}
	if !here {
		return s.relaySnapshot(ctx, leader.ID, leader.APIAddr, req, stream)
	}
	if err := n.raft.ReadIndex(ctx); err != nil {
		return n.toConnect(err)
	}
	// A consistent copy (O(1), copy-on-write) described in a first pass and
	// streamed in a second, so no node holds the whole snapshot
	// (docs/design.md#storage-and-recovery).
	snap := n.sm.Snapshot()
	h, err := snapfile.HeaderOf(snap)
	if err != nil {
		return n.toConnect(err)
	}
	st := n.raft.Status()
	h.Backend, h.Term, h.NodeId = st.Backend, st.Term, n.cfg.ID
	h.CreatedUnixMs = time.Now().UnixMilli()
	w := &chunkWriter{stream: stream, header: h, buf: make([]byte, 0, snapshotChunkBytes)}
	if _, err := snap.WriteTo(w); err != nil {
		// The stream ends with this error; a client that kept the chunks
		// anyway has fewer bytes than SizeBytes (Verify refuses them).
		return err
	}
	return w.flush()
}

// chunkWriter streams snapshot bytes as SnapshotChunks of at most
// snapshotChunkBytes, the first carrying the header (sent even for an empty
// snapshot). Write fails with the stream's send error; nothing is sent after
// one.
type chunkWriter struct {
	stream *connect.ServerStream[ticketv1.SnapshotChunk]
	header *ticketv1.SnapshotHeader // sent with the first chunk, then nil
	buf    []byte
	err    error
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 && w.err == nil {
		k := min(len(p), snapshotChunkBytes-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p, n = p[k:], n+k
		if len(w.buf) == snapshotChunkBytes {
			w.err = w.send()
		}
	}
	return n, w.err
}

// flush sends what is buffered, and the header if no chunk carried it yet.
func (w *chunkWriter) flush() error {
	if w.err == nil && (len(w.buf) > 0 || w.header != nil) {
		w.err = w.send()
	}
	return w.err
}

func (w *chunkWriter) send() error {
	chunk := &ticketv1.SnapshotChunk{Header: w.header, Data: w.buf}
	w.header = nil
	if err := w.stream.Send(chunk); err != nil {
		return err
	}
	w.buf = w.buf[:0] // Send has marshalled the chunk: the buffer is free again
	return nil
}

// relaySnapshot forwards Snapshot to the leader at addr (one hop, marked
// forwarded) and relays its chunks.
func (s *clusterService) relaySnapshot(ctx context.Context, leaderID, addr string, req *ticketv1.SnapshotRequest, stream *connect.ServerStream[ticketv1.SnapshotChunk]) error {
	n := s.n
	out, ci := connect.NewClientContext(ctx)
	ci.RequestHeader().Set(forward.Header, n.cfg.ID)
	stream.ResponseHeader().Set(forward.LeaderHeader, leaderID)
	in, err := n.fwd.Cluster(addr).Snapshot(out, req)
	if err != nil {
		return forward.Sanitize(err)
	}
	defer func() { _ = in.Close() }()
	for in.Receive() {
		if err := stream.Send(in.Msg()); err != nil {
			return err
		}
	}
	if err := in.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return forward.Sanitize(err)
	}
	return ctx.Err()
}
