package hashicorp_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/core"
)

// TestPeerIdentityIsMembership: a certificate of the cluster's CA for an id
// no member has, and a removed member's certificate, are refused for every
// kind of Raft RPC, and a removed member's open connections are closed
// (backendtest.RunPeerIdentity).
func TestPeerIdentityIsMembership(t *testing.T) {
	backendtest.RunPeerIdentity(t, newNode, rpcForger{})
}

// rpcForger speaks hashicorp's wire protocol through raft's own
// NetworkTransport, dialling over TLS with the attacker's certificate.
type rpcForger struct{}

// tlsDialer is a dial-only raft.StreamLayer over TLS with cfg; it keeps the
// connections it dialled.
type tlsDialer struct {
	cfg   *tls.Config
	done  chan struct{}
	once  sync.Once
	mu    sync.Mutex
	conns []net.Conn
}

func (d *tlsDialer) Accept() (net.Conn, error) {
	<-d.done
	return nil, net.ErrClosed
}

func (d *tlsDialer) Close() error {
	d.once.Do(func() { close(d.done) })
	return nil
}

func (d *tlsDialer) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func (d *tlsDialer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	cfg := d.cfg.Clone()
	cfg.ServerName = "127.0.0.1"
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(address), cfg)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.conns = append(d.conns, c)
	d.mu.Unlock()
	return c, nil
}

// transport returns a NetworkTransport dialling with cfg and its dialer.
func (rpcForger) transport(t *testing.T, cfg *tls.Config) (*raft.NetworkTransport, *tlsDialer) {
	d := &tlsDialer{cfg: cfg, done: make(chan struct{})}
	tr := raft.NewNetworkTransport(d, 1, 5*time.Second, io.Discard)
	t.Cleanup(func() {
		tr.CloseStreams()
		_ = tr.Close()
	})
	return tr, d
}

func (f rpcForger) Send(t *testing.T, cfg *tls.Config, target *backendtest.Peer, as string, kind backendtest.PeerMessage, term uint64, forgedKey string) error {
	tr, _ := f.transport(t, cfg)
	defer tr.CloseStreams()
	id, addr := raft.ServerID(target.ID), raft.ServerAddress(target.Addr)
	h := header(as, "127.0.0.1:1")
	const index = 1 << 40
	switch kind {
	case backendtest.MsgVote:
		return tr.RequestVote(id, addr, &raft.RequestVoteRequest{RPCHeader: h, Term: term, LastLogIndex: index, LastLogTerm: term}, &raft.RequestVoteResponse{})
	case backendtest.MsgAppend:
		grant, err := core.Encode(core.Grant(forgedKey, 60_000, "mallory"))
		if err != nil {
			t.Fatal(err)
		}
		last := target.StateMachine().AppliedIndex()
		req := &raft.AppendEntriesRequest{
			RPCHeader: h, Term: term, PrevLogEntry: last, PrevLogTerm: term,
			Entries:           []*raft.Log{{Index: last + 1, Term: term, Type: raft.LogCommand, Data: grant}},
			LeaderCommitIndex: last + 1,
		}
		return tr.AppendEntries(id, addr, req, &raft.AppendEntriesResponse{})
	case backendtest.MsgHeartbeat:
		return tr.AppendEntries(id, addr, &raft.AppendEntriesRequest{RPCHeader: h, Term: term}, &raft.AppendEntriesResponse{})
	case backendtest.MsgSnapshot:
		data := backendtest.ForgedSnapshot(t, forgedKey, index)
		conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(as), Address: "127.0.0.1:1"}}}
		req := &raft.InstallSnapshotRequest{
			RPCHeader: h, SnapshotVersion: raft.SnapshotVersionMax, Term: term, LastLogIndex: index, LastLogTerm: term,
			Configuration: raft.EncodeConfiguration(conf), ConfigurationIndex: index, Size: int64(len(data)),
		}
		return tr.InstallSnapshot(id, addr, req, &raft.InstallSnapshotResponse{}, bytes.NewReader(data))
	case backendtest.MsgTimeoutNow:
		return tr.TimeoutNow(id, addr, &raft.TimeoutNowRequest{RPCHeader: h}, &raft.TimeoutNowResponse{})
	}
	return fmt.Errorf("unknown message kind %q", kind)
}

func (f rpcForger) Open(t *testing.T, cfg *tls.Config, target *backendtest.Peer, as string) (backendtest.PeerConn, error) {
	tr, d := f.transport(t, cfg)
	// A vote request for term 0: answered (not granted), nothing changes.
	req := &raft.RequestVoteRequest{RPCHeader: header(as, "127.0.0.1:1")}
	if err := tr.RequestVote(raft.ServerID(target.ID), raft.ServerAddress(target.Addr), req, &raft.RequestVoteResponse{}); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.conns) != 1 {
		return nil, fmt.Errorf("%d connections dialled, want 1", len(d.conns))
	}
	return &pooledConn{c: d.conns[0], tr: tr}, nil
}

// pooledConn is the connection a transport keeps after an answered RPC.
type pooledConn struct {
	c  net.Conn
	tr *raft.NetworkTransport
}

func (p *pooledConn) WaitClosed(timeout time.Duration) error {
	_ = p.c.SetReadDeadline(time.Now().Add(timeout))
	_, err := p.c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("still open after %v", timeout)
	}
	if err == nil {
		return errors.New("the node sent bytes nobody asked for")
	}
	return nil
}

func (p *pooledConn) Close() {
	p.tr.CloseStreams()
	_ = p.tr.Close()
}

// TestDialedPeerIsTheMember: a node dialling a member's address refuses a
// server certificate for any other id, so an impostor on that address
// cannot grant votes or acknowledge appends in the member's name
// (backendtest.RunDialIdentity).
func TestDialedPeerIsTheMember(t *testing.T) {
	backendtest.RunDialIdentity(t, newNode)
}
