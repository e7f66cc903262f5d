// Package transport carries etcd raft messages (raftpb.Message) between the
// nodes of a ticketd cluster, in place of etcd's rafthttp, which would drag
// in all of etcd's server module: each peer's messages on one HTTP/1.1
// connection upgraded to a raw stream, snapshots over HTTP/2; cleartext by
// default, or over mutual TLS 1.3 when Config.TLS is set (etcd's
// --peer-client-cert-auth: both sides present a certificate of the peer CA;
// a plaintext client, one without a certificate or one from another CA is
// refused at the handshake and the refusal logged at Warn).
//
// Every length read from a peer is bounded by Config.MaxMessageBytes before
// anything is allocated for it (a declared 1 GiB message ends the stream with
// ErrTooLarge); below the bound, memory grows with the bytes that arrive,
// not with the length declared.
//
// Every message being read takes its buffer from one budget shared by all
// inbound streams (Config.MaxBufferedBytes; ErrBudget past it). The server
// admits at most Config.MaxConns connections (Config.MaxConnsPerIP per
// remote IP; package backends/internal/peerlimit; an upgraded stream keeps
// its connection's slot), at most MaxConcurrentStreams HTTP/2 streams on
// each, and closes a connection with no stream, or ends a message stream
// with no byte, after Config.IdleTimeout; senders write an empty keepalive
// frame every IdleTimeout/4 on an open stream.
//
// The sender headers are an unverified claim: the receiver hands them to
// Deliver, but a node must never take a member's address from them (the etcd
// backend keeps its address book from replicated membership only). Over
// TLS, a certificate naming a member (Config.PeerBinding) may only carry
// messages from that member's raft id (ErrForgedSender).
//
// Each peer has one ordered, bounded send queue drained by one goroutine
// into one long-lived stream (etcd rafthttp's stream). Every write carries
// all the messages queued so far, so a burst of appends costs one write,
// and messages to a peer arrive in the order they were sent. Send never
// blocks the raft loop: when a queue is full the message is dropped and
// Send returns false, so the caller reports the peer unreachable, as for a
// broken stream (etcd raft doc.go; rafthttp's behaviour). A broken stream
// is reopened on the next message (or keepalive). Snapshot messages
// (MsgSnap) go in their own POST to /raft/v1/messages outside the queue,
// and their outcome is reported for RawNode.ReportSnapshot.
//
// The stream is a GET to /raft/v1/stream that upgrades its HTTP/1.1
// connection (Connection: Upgrade, Upgrade: ticketd-raft-stream/1, as
// WebSocket and h2c upgrade theirs); after the receiver's 101 the peer's
// send goroutine writes batches straight to the connection (each write
// bounded by SendTimeout) and the receiver's handler goroutine, which
// hijacked it, reads them straight off it and hands them to Deliver: two
// goroutines between the raft loops, where HTTP/2 adds its body writer,
// frame reader and serve loop. Over TLS the sender offers http/1.1 and h2
// by ALPN and the receiver prefers http/1.1. A receiver of the previous
// release has no upgrade (it negotiates h2, or answers 405): the sender
// then opens that release's stream, a POST to /raft/v1/stream over HTTP/2
// whose request body stays open while the peer is up, which this release
// still serves, so nodes of the two releases talk both ways during a
// rolling upgrade. Every reconnect tries the upgrade first.
//
// The wire format of the three requests:
//
//	headers  Ticketd-Raft-To: <receiver raft id, decimal>
//	         Ticketd-Raft-From-Id: <sender's member id>
//	         Ticketd-Raft-From-Addr: <sender's advertised raft address>
//	body     repeated { uvarint length, marshalled raftpb.Message }
//	         (after the 101 on an upgraded connection; the request body
//	         of a POST)
//
// The receiver answers 421 when it is not the addressed node (a stale
// address) and 403 to a certificate naming no current member. To the GET
// it answers 101 and then only reads (426 without the upgrade headers); to
// a POSTed stream 200 at once and then only reads; on /raft/v1/messages
// 204 once every message has been handed to Deliver, 400 for a body that
// does not parse. The sender reads at most 64 KiB of the answer to its GET
// and ends the stream on any byte after the 101.
//
// # Usage
//
//  1. New(cfg) listens on cfg.BindAddr and serves; received batches go to
//     cfg.Deliver on the goroutine reading the stream.
//  2. SetPeer(id, addr) for every other member, again whenever its address
//     changes; RemovePeer(id) when it leaves.
//  3. From the raft loop, Send(m) each message of a Ready, in order; when it
//     returns false, report the peer unreachable (or the snapshot failed).
//  4. Read Reports() in the raft loop and pass each to
//     RawNode.ReportUnreachable or RawNode.ReportSnapshot.
//  5. Close stops the server, the queues and the snapshot senders.
//
// Example:
//
//	tr, err := transport.New(transport.Config{NodeID: 1, ID: "n1", Addr: addr, BindAddr: addr, Deliver: deliver, TLS: peerTLS})
//	if err != nil {
//		return err
//	}
//	defer tr.Close()
//	tr.SetPeer(2, "127.0.0.1:7102")
//	for _, m := range rd.Messages {
//		if !tr.Send(m) {
//			rn.ReportUnreachable(m.GetTo())
//		}
//	}
package transport
