package etcd_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
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

// Open opens one message stream in each framing the node reads: an
// HTTP/1.1 connection upgraded to upgradeProtocol, and the previous
// release's HTTP/2 POST. The returned PeerConn is closed once both are.
func (msgForger) Open(t *testing.T, cfg *tls.Config, target *backendtest.Peer, as string) (backendtest.PeerConn, error) {
	up, err := openUpgradedStream(cfg, target, as)
	if err != nil {
		return nil, fmt.Errorf("upgraded stream: %w", err)
	}
	h2, err := openHTTP2Stream(t, cfg, target, as)
	if err != nil {
		up.Close()
		return nil, fmt.Errorf("HTTP/2 stream: %w", err)
	}
	return streams{up, h2}, nil
}

// upgradeProtocol is the Upgrade token of the transport's message stream
// (package doc).
const upgradeProtocol = "ticketd-raft-stream/1"

// openUpgradedStream opens the message stream on an HTTP/1.1 connection
// upgraded to upgradeProtocol, over TLS with cfg.
func openUpgradedStream(cfg *tls.Config, target *backendtest.Peer, as string) (*upgradedStream, error) {
	c := cfg.Clone()
	c.NextProtos = []string{"http/1.1"}
	c.ServerName = "127.0.0.1"
	conn, err := tls.Dial("tcp", target.Addr, c)
	if err != nil {
		return nil, err
	}
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		_ = conn.Close()
		return nil, err
	}
	req, err := http.NewRequest(http.MethodGet, "https://"+target.Addr+streamPath, nil)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", upgradeProtocol)
	req.Header.Set(headerTo, strconv.FormatUint(nodeID(target.ID), 10))
	req.Header.Set(headerFromID, as)
	req.Header.Set(headerFromAddr, "127.0.0.1:1")
	br := bufio.NewReader(conn)
	var resp *http.Response
	if err = req.Write(conn); err == nil {
		resp, err = http.ReadResponse(br, req)
	}
	if err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusSwitchingProtocols {
			err = fmt.Errorf("upgrade answered %d", resp.StatusCode)
		}
	}
	if err == nil {
		err = conn.SetDeadline(time.Time{})
	}
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	s := &upgradedStream{conn: conn, ended: make(chan struct{})}
	go func() {
		defer close(s.ended)
		_, _ = io.Copy(io.Discard, br) // the node never writes after its 101: this ends with the connection
	}()
	return s, nil
}

// upgradedStream is an upgraded message stream a msgForger opened.
type upgradedStream struct {
	conn  net.Conn
	ended chan struct{} // closed when the node ended the stream
}

func (s *upgradedStream) WaitClosed(timeout time.Duration) error {
	return waitEnded(s.ended, timeout, "upgraded stream")
}

func (s *upgradedStream) Close() {
	_ = s.conn.Close()
	<-s.ended
}

// openHTTP2Stream opens the previous release's message stream: a POST over
// HTTP/2 on TLS with cfg whose body stays open.
func openHTTP2Stream(t *testing.T, cfg *tls.Config, target *backendtest.Peer, as string) (*openStream, error) {
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

// streams is the pair of streams Open opened, closed once both are.
type streams []backendtest.PeerConn

func (ss streams) WaitClosed(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, s := range ss {
		if err := s.WaitClosed(time.Until(deadline)); err != nil {
			return err
		}
	}
	return nil
}

func (ss streams) Close() {
	for _, s := range ss {
		s.Close()
	}
}

// openStream is an HTTP/2 message stream a msgForger opened.
type openStream struct {
	rt     *http.Transport
	cancel context.CancelFunc
	pw     *io.PipeWriter
	ended  chan struct{} // closed when the node ended the stream
}

func (s *openStream) WaitClosed(timeout time.Duration) error {
	return waitEnded(s.ended, timeout, "HTTP/2 stream")
}

// waitEnded returns nil once ended is closed, an error naming what is
// still open after timeout.
func waitEnded(ended <-chan struct{}, timeout time.Duration, what string) error {
	select {
	case <-ended:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s still open after %v", what, timeout)
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
