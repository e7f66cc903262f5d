package hashicorp

import (
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/internal/peergate"
	"github.com/ticketd/ticketd/backends/internal/peerlimit"
)

// This file builds the peer transport (hashicorp's NetworkTransport over a
// bounded TCP or TLS stream layer), the view of membership its certificate
// checks use, and the message drops tests inject.

// transportTimeout bounds each network I/O of the TCP transport (InstallSnapshot
// scales it with the snapshot size), as Consul configures it.
const transportTimeout = 10 * time.Second

// transportMaxPool is how many idle TCP connections are kept per peer.
const transportMaxPool = 3

// newTransport listens on cfg.BindAddr and advertises cfg.RaftAddr to peers:
// over plain TCP (a tcpStreamLayer) when cfg.PeerTLS is nil, over mutual TLS
// 1.3 (a tlsStreamLayer) when it is set; either way at most
// cfg.MaxPeerConns accepted connections are open (cfg.MaxPeerConnsPerIP per
// remote IP, peerlimit), an accepted one idle for cfg.PeerIdleTimeout is
// closed, and every connection reads at most cfg.MaxMessageBytes per
// message (a boundedStreamLayer), and
// failures are counted when cfg.Observer is a backends.PeerObserver. When
// cfg.DropMessage is non-nil the transport is wrapped by a dropTransport.
//
// Over mutual TLS, gate binds every accepted connection's certificate to
// membership: a certificate naming no current member is refused at the
// handshake, each request is checked again (boundedConn), and the
// connections of a member that leaves are closed.
func newTransport(cfg backends.Config, logger *zapHCLog, gate *peergate.Gate, members *peerMembers) (raft.Transport, io.Closer, error) {
	adv, err := net.ResolveTCPAddr("tcp", cfg.RaftAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("hashicorp: resolve raft address %q: %w", cfg.RaftAddr, err)
	}
	tc := &raft.NetworkTransportConfig{
		Logger:  logger.Named("transport"),
		MaxPool: transportMaxPool,
		Timeout: transportTimeout,
	}
	count := backends.PeerErrorCounter(cfg.Observer)
	limit := peerlimit.Config{
		MaxConns:      cfg.MaxPeerConns,
		MaxConnsPerIP: cfg.MaxPeerConnsPerIP,
		Log:           logger.z.Named("transport"),
		Count:         count,
	}
	var sl raft.StreamLayer
	if cfg.PeerTLS == nil {
		sl, err = newTCPStreamLayer(cfg.BindAddr, adv, limit, count)
	} else {
		sl, err = newTLSStreamLayer(cfg.BindAddr, adv, gate.ServerTLS(cfg.PeerTLS), cfg.PeerTLS, members.at, limit, cfg.PeerIdleTimeout, logger.z.Named("transport"), count)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("hashicorp: listen on %q: %w", cfg.BindAddr, err)
	}
	tc.Stream = newBoundedStreamLayer(sl, cfg.MaxMessageBytes, cfg.PeerIdleTimeout, gate, logger.z.Named("transport"), count)
	nt := raft.NewNetworkTransportWithConfig(tc)
	if cfg.DropMessage == nil {
		return nt, nt, nil
	}
	return &dropTransport{NetworkTransport: nt, from: cfg.ID, drop: cfg.DropMessage}, nt, nil
}

// peerMembers reads the node's latest Raft configuration for the peer
// certificate binding (peergate.Source). Its raft is set once New has
// created it; until then nothing is known. Safe for concurrent use.
type peerMembers struct {
	r atomic.Pointer[raft.Raft]
}

// ids returns the servers (voters and nonvoters) of the latest
// configuration, the one hashicorp's raft acts on as soon as it is
// appended (Raft thesis §4.1), and whether it is known yet.
func (m *peerMembers) ids() ([]string, bool) {
	r := m.r.Load()
	if r == nil {
		return nil, false
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return nil, false
	}
	servers := f.Configuration().Servers
	ids := make([]string, len(servers))
	for i, s := range servers {
		ids[i] = string(s.ID)
	}
	return ids, true
}

// at returns the ids of the servers (voters and nonvoters) of the latest
// configuration whose raft address is address, and whether the
// configuration is known yet: whom a connection dialled to address must
// reach (tlsStreamLayer.verifyServerIdentity). Safe for concurrent use.
func (m *peerMembers) at(address string) ([]string, bool) {
	r := m.r.Load()
	if r == nil {
		return nil, false
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return nil, false
	}
	var ids []string
	for _, s := range f.Configuration().Servers {
		if string(s.Address) == address {
			ids = append(ids, string(s.ID))
		}
	}
	return ids, true
}

// dropTransport is the fault-injecting wrapper behind backends.Config.DropMessage:
// an outbound RPC for which drop(from, to) is true fails with ErrDropped before
// anything is sent, as a dead link would fail it. Inbound traffic is not
// filtered: a partition is symmetric when both directions drop (hashicorp's
// own cluster.Partition does the same with InmemTransport).
type dropTransport struct {
	*raft.NetworkTransport
	from string
	drop func(from, to string) bool
}

var (
	_ raft.Transport   = (*dropTransport)(nil)
	_ raft.WithPreVote = (*dropTransport)(nil)
	_ raft.WithClose   = (*dropTransport)(nil)
)

func (t *dropTransport) check(to raft.ServerID) error {
	if t.drop(t.from, string(to)) {
		return fmt.Errorf("%w: %s -> %s", ErrDropped, t.from, to)
	}
	return nil
}

// AppendEntriesPipeline wraps the pipeline so that each pipelined request is
// filtered too.
func (t *dropTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if err := t.check(id); err != nil {
		return nil, err
	}
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return &dropPipeline{AppendPipeline: p, t: t, to: id}, nil
}

func (t *dropTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if err := t.check(id); err != nil {
		return err
	}
	return t.NetworkTransport.AppendEntries(id, target, args, resp)
}

func (t *dropTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if err := t.check(id); err != nil {
		return err
	}
	return t.NetworkTransport.RequestVote(id, target, args, resp)
}

func (t *dropTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if err := t.check(id); err != nil {
		return err
	}
	return t.NetworkTransport.RequestPreVote(id, target, args, resp)
}

func (t *dropTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if err := t.check(id); err != nil {
		return err
	}
	return t.NetworkTransport.InstallSnapshot(id, target, args, resp, data)
}

func (t *dropTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	if err := t.check(id); err != nil {
		return err
	}
	return t.NetworkTransport.TimeoutNow(id, target, args, resp)
}

// dropPipeline filters the requests of one AppendEntries pipeline.
type dropPipeline struct {
	raft.AppendPipeline
	t  *dropTransport
	to raft.ServerID
}

func (p *dropPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	if err := p.t.check(p.to); err != nil {
		return nil, err
	}
	return p.AppendPipeline.AppendEntries(args, resp)
}
