package etcd_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/core"
)

// streamPath is the transport's long-lived message stream (package doc).
const streamPath = "/raft/v1/stream"

// TestPeerIdentityIsMembership: a certificate of the cluster's CA for an id
// no member has, and a removed member's certificate, are refused for every
// kind of raft message, and a removed member's open message streams are
// ended (backendtest.RunPeerIdentity).
func TestPeerIdentityIsMembership(t *testing.T) {
	backendtest.RunPeerIdentity(t, newNode, msgForger{})
}

// msgForger speaks the etcd backend's peer protocol from its documentation:
// batches POSTed to the messages path, streams to the stream path.
type msgForger struct{}

func (msgForger) Send(t *testing.T, cfg *tls.Config, target *backendtest.Peer, as string, kind backendtest.PeerMessage, term uint64, forgedKey string) error {
	from, to := nodeID(as), nodeID(target.ID)
	m := &pb.Message{From: new(from), To: new(to), Term: new(term)}
	const index = 1 << 40
	switch kind {
	case backendtest.MsgVote:
		m.Type, m.Index, m.LogTerm = pb.MessageType_MsgVote.Enum(), new(uint64(index)), new(term)
	case backendtest.MsgAppend:
		last := target.StateMachine().AppliedIndex()
		m.Type, m.Index, m.LogTerm, m.Commit = pb.MessageType_MsgApp.Enum(), new(last), new(term), new(last+1)
		m.Entries = []*pb.Entry{{Term: new(term), Index: new(last + 1), Type: pb.EntryType_EntryNormal.Enum(),
			Data: entryData(t, core.Grant(forgedKey, 60_000, "mallory"))}}
	case backendtest.MsgSnapshot:
		m.Type = pb.MessageType_MsgSnap.Enum()
		m.Snapshot = &pb.Snapshot{
			Data: backendtest.ForgedSnapshot(t, forgedKey, index),
			Metadata: &pb.SnapshotMetadata{Index: new(uint64(index)), Term: new(term),
				ConfState: &pb.ConfState{Voters: []uint64{from}}},
		}
	case backendtest.MsgHeartbeat:
		m.Type = pb.MessageType_MsgHeartbeat.Enum()
	case backendtest.MsgTimeoutNow:
		m.Type = pb.MessageType_MsgTimeoutNow.Enum()
	default:
		return fmt.Errorf("unknown message kind %q", kind)
	}
	status, err := forgeWith(t, cfg, target.Addr, target.ID, as, "127.0.0.1:1", m)
	if err != nil {
		return err
	}
	if status != http.StatusNoContent {
		return fmt.Errorf("answered %d", status)
	}
	return nil
}

func (msgForger) Open(t *testing.T, cfg *tls.Config, target *backendtest.Peer, as string) (backendtest.PeerConn, error) {
	var protocols http.Protocols
	protocols.SetHTTP2(true)
	rt := &http.Transport{Protocols: &protocols, TLSClientConfig: cfg}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+target.Addr+streamPath, pr)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req.Header.Set(headerTo, strconv.FormatUint(nodeID(target.ID), 10))
	req.Header.Set(headerFromID, as)
	req.Header.Set(headerFromAddr, "127.0.0.1:1")
	s := &openStream{rt: rt, cancel: cancel, pw: pw}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		s.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		s.Close()
		return nil, fmt.Errorf("stream answered %d", resp.StatusCode)
	}
	s.ended = make(chan struct{})
	go func() {
		defer close(s.ended)
		_, _ = io.Copy(io.Discard, resp.Body) // the node never answers more: this ends with the stream
		resp.Body.Close()
	}()
	return s, nil
}

// openStream is a message stream a msgForger opened.
type openStream struct {
	rt     *http.Transport
	cancel context.CancelFunc
	pw     *io.PipeWriter
	ended  chan struct{} // closed when the node ended the stream
}

func (s *openStream) WaitClosed(timeout time.Duration) error {
	select {
	case <-s.ended:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("stream still open after %v", timeout)
	}
}

func (s *openStream) Close() {
	_ = s.pw.Close()
	s.cancel()
	if s.ended != nil {
		<-s.ended
	}
	s.rt.CloseIdleConnections()
}

// TestDialedPeerIsTheMember: a node dialling a member's address refuses a
// server certificate for any other id, so an impostor on that address
// receives none of the messages meant for the member
// (backendtest.RunDialIdentity).
func TestDialedPeerIsTheMember(t *testing.T) {
	backendtest.RunDialIdentity(t, newNode)
}
