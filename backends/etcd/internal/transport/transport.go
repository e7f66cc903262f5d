package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/internal/peergate"
	"github.com/ticketd/ticketd/backends/internal/peerlimit"
)

// Sentinel errors of package transport. Compare with errors.Is.
var (
	// ErrClosed: the transport has been closed.
	ErrClosed = errors.New("transport: closed")
	// ErrBadBatch: a received body is not a sequence of length-prefixed
	// raftpb.Messages.
	ErrBadBatch = errors.New("transport: malformed message batch")
	// ErrMisdirected: the receiver is not the node the request was addressed
	// to (the sender holds a stale address).
	ErrMisdirected = errors.New("transport: misdirected request")
	// ErrBudget: the messages being read from all peers at once would hold
	// more than Config.MaxBufferedBytes; the stream or request that would
	// exceed it is ended.
	ErrBudget = errors.New("transport: receive buffer budget exhausted")
	// ErrForgedSender: a peer with a certificate sent a message whose From
	// is not the raft id of the member its certificate names
	// (Config.PeerRaftID); the stream or request is ended.
	ErrForgedSender = errors.New("transport: message from another member than the peer certificate names")
	// ErrTooLarge: a peer declared a message (or sent a batch) larger than
	// Config.MaxMessageBytes; it is refused before anything is allocated
	// for it, and the stream or request is ended.
	ErrTooLarge = errors.New("transport: message too large")
)

// URL paths: StreamPath carries a peer's long-lived message stream, either
// a GET that upgrades its HTTP/1.1 connection to UpgradeProtocol (upgrade.go)
// or, from a node of the previous release, one HTTP/2 POST whose request
// body never ends while the peer is up; Path takes one batch per POST
// (snapshots).
const (
	StreamPath = "/raft/v1/stream"
	Path       = "/raft/v1/messages"
)

// Header names of a batch request; see the package comment.
const (
	headerTo       = "Ticketd-Raft-To"
	headerFromID   = "Ticketd-Raft-From-Id"
	headerFromAddr = "Ticketd-Raft-From-Addr"
)

// Defaults of the optional Config fields.
const (
	DefaultQueueSize       = 4096
	DefaultMaxBatchBytes   = 4 << 20
	DefaultSendTimeout     = 5 * time.Second
	DefaultSnapshotTimeout = time.Minute
	// DefaultMaxMessageBytes bounds one received message when
	// Config.MaxMessageBytes is zero: 64 MiB.
	DefaultMaxMessageBytes = 64 << 20
	// readChunk is how much of a declared message is allocated at a time:
	// memory grows with the bytes that actually arrive, never with the
	// length a peer declares.
	readChunk     = 64 << 10
	redialBackoff = 50 * time.Millisecond
	// DefaultIdleTimeout is Config.IdleTimeout when zero.
	DefaultIdleTimeout = 10 * time.Second
	// MaxConcurrentStreams is how many HTTP/2 streams one peer connection
	// may have open at once: a peer's transport uses one long-lived
	// message stream and, while it sends a snapshot, one POST (etcd
	// raft sends a follower one snapshot at a time); 4 leaves room for a
	// stream being replaced.
	MaxConcurrentStreams = 4
)

// Sender names the node a batch came from, as its request headers say: an
// unverified claim, for logs only. The receiver never takes an address from
// it: addresses come from replicated membership (a joining node learns them
// from its join answer, backends.PeerLearner).
type Sender struct {
	// ID is the sender's member id; Addr its advertised raft address.
	ID   string
	Addr string
}

// Report is the outcome of a send that the raft loop must hear about.
type Report struct {
	// To is the raft id of the peer.
	To uint64
	// Snapshot is true for the outcome of a MsgSnap (for ReportSnapshot), false
	// for a failed batch (for ReportUnreachable).
	Snapshot bool
	// Failed is true when the send did not reach the peer.
	Failed bool
}

// Config configures New.
type Config struct {
	// NodeID is this node's raft id; ID and Addr its member id and advertised
	// raft address, sent with every batch so a receiver can answer a sender
	// whose address it has not learned yet (a joining node).
	NodeID uint64
	ID     string
	Addr   string
	// BindAddr is the host:port to listen on ("127.0.0.1:0" picks a port).
	BindAddr string
	// Deliver receives the messages of one batch from the goroutine
	// reading the stream or request, in the order sent. It may block until
	// ctx is done (the request's, or Close for an upgraded stream); an
	// error ends the stream, or answers a POSTed batch 503 (the node is
	// stopping).
	Deliver func(ctx context.Context, from Sender, msgs []*pb.Message) error
	// Logger receives the transport's logs; nil means zap.NewNop().
	Logger *zap.Logger
	// QueueSize bounds each peer's send queue, in messages. Default 4096.
	QueueSize int
	// MaxBatchBytes bounds one POST's body, in bytes (a single larger message
	// still goes alone). Default 4 MiB.
	MaxBatchBytes int
	// SendTimeout bounds one POST of a batch; SnapshotTimeout one MsgSnap.
	// Defaults 5s and 1m.
	SendTimeout     time.Duration
	SnapshotTimeout time.Duration
	// TLS, if set, is backends.Config.PeerTLS: the transport then serves and
	// dials TLS 1.3 only (HTTP/1.1 for upgraded streams, HTTP/2 for
	// snapshots), with client certificates required and verified against
	// the peer CA (backends.PeerServerTLS and backends.PeerClientTLS);
	// plaintext and unverified peers are refused at the handshake and
	// logged. Nil: cleartext (HTTP/1.1, and h2c with prior knowledge).
	TLS *tls.Config
	// MaxMessageBytes bounds every length read from a peer, in bytes: one
	// message on a stream, one POSTed batch. Larger declared lengths are
	// refused with ErrTooLarge before any allocation. Default
	// DefaultMaxMessageBytes.
	MaxMessageBytes int
	// CountError, if set, counts one peer transport failure
	// (backends.PeerObserver.PeerTransportError): peer is the peer's raft
	// address for a connection this transport dialled, the remote address
	// for one it accepted (the sender is not identified yet); kind is
	// "dial", "handshake" (TLS refused, either way), "read", "write" or
	// "oversize". Called from the transport's goroutines: it must not block.
	CountError func(peer, kind string)
	// MaxConns and MaxConnsPerIP cap the accepted peer connections, in
	// total and per remote IP (package backends/internal/peerlimit;
	// backends.Config.MaxPeerConns); refusals are counted as "refused".
	// Zero or negative: no cap.
	MaxConns      int
	MaxConnsPerIP int
	// IdleTimeout closes an accepted connection with no open stream, and
	// ends a message stream on which no byte arrived, after that long; it
	// also bounds a connection's TLS handshake and request headers. The
	// sender keeps its streams alive with an empty frame every
	// IdleTimeout/4. Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxBufferedBytes bounds the bytes of partly received messages held
	// at once across every inbound stream and request; a read that would
	// go past it ends that stream (ErrBudget, counted as "oversize").
	// Default 2 × MaxMessageBytes + 4 MiB: one message of the maximum from
	// two peers at once, plus their small ones.
	MaxBufferedBytes int64
	// Gate, if set, binds peer certificates to membership over TLS
	// (package peergate): a certificate whose common name is not a
	// current member's id (its member id, as ticketctl cert create-node
	// --id writes it) is refused at the handshake, a stream or batch
	// under one is refused (403) once that member is removed, and an open
	// stream is ended when Gate.Refresh finds its member gone. Every
	// received message's From must be RaftID of that name: a message
	// from another is refused (ErrForgedSender, logged, counted as
	// "identity"), and the stream ended or the batch answered 403, so a
	// node's certificate cannot speak as another member. Nil, or a
	// connection without TLS: no check.
	Gate *peergate.Gate
	// RaftID maps a member id to its raft id; required with Gate.
	RaftID func(memberID string) uint64
}

// Transport sends and receives raft messages. Send, SetPeer and RemovePeer
// must be called from one goroutine (the raft loop); Reports may be read from
// any one goroutine; Close from any.
type Transport struct {
	cfg    Config
	scheme string // "http://" (h2c) or "https://" (TLS)
	log    *zap.Logger
	ln     net.Listener
	srv    *http.Server
	client *http.Client
	budget atomic.Int64 // bytes of partly received messages (MaxBufferedBytes)

	// dialer and clientTLS dial peers for both the HTTP/2 client and the
	// upgraded streams (dial); clientTLS is nil without TLS.
	dialer    *net.Dialer
	clientTLS *tls.Config
	// upgraded holds the accepted connections that became message streams
	// (upgrade.go): http.Server.Close no longer knows them.
	upgraded upgradedConns

	peers   map[uint64]*peer
	reports chan Report
	// peerAt maps each peer's raft address to the raft ids set at it
	// (SetPeer), rebuilt by SetPeer and RemovePeer and read by the TLS
	// dialer (verifyServerIdentity) on any goroutine.
	peerAt atomic.Pointer[map[string][]uint64]

	stop      chan struct{}
	ctx       context.Context // cancelled by Close: aborts POSTs in flight
	cancel    context.CancelFunc
	closeOnce sync.Once
	// wg counts the serve goroutine, peer goroutines, snapshot senders and
	// every accepted connection's goroutine (connState).
	wg sync.WaitGroup
}

// New listens on cfg.BindAddr and starts serving. Errors: the listener's.
func New(cfg Config) (*Transport, error) {
	if cfg.Deliver == nil {
		return nil, errors.New("transport: nil Deliver")
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = DefaultSendTimeout
	}
	if cfg.SnapshotTimeout <= 0 {
		cfg.SnapshotTimeout = DefaultSnapshotTimeout
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxBufferedBytes <= 0 {
		cfg.MaxBufferedBytes = 2*int64(cfg.MaxMessageBytes) + 4<<20
	}
	ln, err := net.Listen("tcp", cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("transport: listen %s: %w", cfg.BindAddr, err)
	}
	ln = peerlimit.NewListener(ln, peerlimit.Config{
		MaxConns:      cfg.MaxConns,
		MaxConnsPerIP: cfg.MaxConnsPerIP,
		Log:           cfg.Logger.Named("transport"),
		Count:         cfg.CountError,
	})
	var protocols http.Protocols
	var clientProtocols http.Protocols
	var serverTLS, clientTLS *tls.Config
	if cfg.TLS == nil {
		protocols.SetHTTP1(true)
		protocols.SetUnencryptedHTTP2(true)
		clientProtocols.SetUnencryptedHTTP2(true) // h2c with prior knowledge
	} else {
		protocols.SetHTTP1(true)
		protocols.SetHTTP2(true)
		clientProtocols.SetHTTP2(true)
		serverTLS = backends.PeerServerTLS(cfg.TLS)
		if cfg.Gate != nil {
			serverTLS = cfg.Gate.ServerTLS(cfg.TLS)
		}
		// http/1.1 first: the server's order decides (crypto/tls), so a
		// sender offering both for an upgraded stream gets HTTP/1.1,
		// while a sender of the previous release, offering h2 alone,
		// still gets HTTP/2.
		serverTLS.NextProtos = []string{"http/1.1", "h2"}
		clientTLS = backends.PeerClientTLS(cfg.TLS, "") // http.Transport sets ServerName per host
		clientTLS.NextProtos = []string{"h2"}
		ln = tls.NewListener(ln, serverTLS)
	}
	t := &Transport{
		cfg:     cfg,
		scheme:  "http://",
		log:     cfg.Logger.Named("transport"),
		ln:      ln,
		peers:   map[uint64]*peer{},
		reports: make(chan Report, 1024),
		stop:    make(chan struct{}),
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	errorLog, err := zap.NewStdLogAt(t.log, zap.WarnLevel)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("transport: error log: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+Path, t.serveBatch)
	mux.HandleFunc("POST "+StreamPath, t.serveStream)
	mux.HandleFunc("GET "+StreamPath, t.serveUpgrade)
	t.srv = &http.Server{
		Handler:           mux,
		Protocols:         &protocols,
		TLSConfig:         serverTLS,
		ReadHeaderTimeout: min(10*time.Second, cfg.IdleTimeout),
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    16 << 10,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: MaxConcurrentStreams},
		// Refused handshakes ("http: TLS handshake error from ...") are
		// logged at Warn: someone without a peer certificate knocked.
		ErrorLog:  errorLog,
		ConnState: t.connState,
	}
	if cfg.TLS != nil {
		t.scheme = "https://"
	}
	t.dialer = &net.Dialer{Timeout: cfg.SendTimeout, KeepAlive: 30 * time.Second}
	t.clientTLS = clientTLS
	rt := &http.Transport{
		Protocols:       &clientProtocols,
		TLSClientConfig: clientTLS,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return t.dialTCP(ctx, addr)
		},
	}
	if clientTLS != nil {
		rt.DialTLSContext = func(ctx context.Context, _, addr string) (net.Conn, error) {
			return t.dial(ctx, addr, []string{"h2"})
		}
	}
	t.client = &http.Client{Transport: rt}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		if err := t.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.log.Error("serve", zap.Error(err))
		}
	}()
	return t, nil
}

// dialTCP connects to addr, counting a failure as "dial".
func (t *Transport) dialTCP(ctx context.Context, addr string) (net.Conn, error) {
	c, err := t.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.countError(addr, "dial")
	}
	return c, err
}

// dial connects to the peer at addr: plain TCP without TLS; with it, a
// mutual TLS 1.3 handshake offering protos by ALPN, in which the server's
// certificate must name the member set at addr (verifyServerIdentity,
// with a Gate). The handshake is done here rather than in http.Transport
// so that a refused one (logged, counted as "handshake") is told apart
// from a failed dial (counted as "dial").
func (t *Transport) dial(ctx context.Context, addr string, protos []string) (net.Conn, error) {
	c, err := t.dialTCP(ctx, addr)
	if err != nil || t.clientTLS == nil {
		return c, err
	}
	host, _, _ := net.SplitHostPort(addr)
	cfg := backends.PeerClientTLS(t.clientTLS, host)
	cfg.NextProtos = protos
	if t.cfg.Gate != nil && t.cfg.RaftID != nil {
		prev := cfg.VerifyConnection
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if prev != nil {
				if err := prev(cs); err != nil {
					return err
				}
			}
			return t.verifyServerIdentity(addr, cs)
		}
	}
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		t.log.Warn("peer TLS handshake failed", zap.String("peer", addr), zap.Error(err))
		_ = c.Close()
		t.countError(addr, "handshake")
		return nil, err
	}
	return tc, nil
}

// countError passes one failure to Config.CountError, if set.
func (t *Transport) countError(peer, kind string) {
	if t.cfg.CountError != nil {
		t.cfg.CountError(peer, kind)
	}
}

// connState counts an accepted TLS connection that closes without a
// completed handshake (no certificate, one from another CA, plaintext, or a
// peer that connected and said nothing) as a refused "handshake".
//
// A connection whose first request has arrived (StateActive) is marked
// established for the connection cap (peerlimit.MarkEstablished).
//
// Every accepted connection's goroutine is counted in t.wg from StateNew
// (reported by the serve goroutine before it starts the connection's, so
// the count never drops to zero meanwhile) to StateClosed, which that
// goroutine reports last, or to StateHijacked: Close waits for them.
// http.Server.Close closes the connections but does not wait, and an
// HTTP/1 connection whose handler left the request body unread (an
// oversized batch) lingers up to half a second after its answer so the
// client reads it before a reset (net/http's rstAvoidanceDelay, RFC 7230
// section 6.6).
func (t *Transport) connState(c net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		t.wg.Add(1)
	case http.StateActive:
		peerlimit.MarkEstablished(c)
	case http.StateHijacked:
		// An upgraded stream (serveUpgrade), which counts its goroutine
		// itself from here on.
		t.wg.Done()
	case http.StateClosed:
		defer t.wg.Done()
		if tc, ok := c.(*tls.Conn); ok && !tc.ConnectionState().HandshakeComplete {
			t.countError(c.RemoteAddr().String(), "handshake")
		}
	}
}

// Addr returns the address the transport listens on.
func (t *Transport) Addr() net.Addr { return t.ln.Addr() }

// Reports returns the channel of send outcomes the raft loop must pass on to
// raft: failed batches (ReportUnreachable) and every MsgSnap's outcome
// (ReportSnapshot). Snapshot outcomes are never dropped; unreachable reports
// are dropped when the channel is full (raft learns again on the next failure).
func (t *Transport) Reports() <-chan Report { return t.reports }

// verifyServerIdentity refuses the server certificate of a connection
// dialled to addr unless its common name is the member id of a peer set
// at addr (SetPeer) and a current member (Config.Gate). Peer identity is
// membership in both directions
// (docs/security.md#peer-identity-is-membership): without it, a certificate
// the CA signed for another id (a removed member's, one for an id no member
// has) answering on a member's address (the member down and its port taken, or
// the address intercepted) would receive every message meant for that member,
// entries included. Errors wrap ErrForgedSender or peergate.ErrNotMember.
func (t *Transport) verifyServerIdentity(addr string, cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%w: %s presented no certificate", ErrForgedSender, addr)
	}
	cn := cs.PeerCertificates[0].Subject.CommonName
	if err := t.cfg.Gate.Check(cn); err != nil {
		return err
	}
	var ids []uint64
	if m := t.peerAt.Load(); m != nil {
		ids = (*m)[strings.ToLower(addr)]
	}
	if !slices.Contains(ids, t.cfg.RaftID(cn)) {
		return fmt.Errorf("%w: %s presented a certificate for %q, which is not the member set at that address", ErrForgedSender, addr, cn)
	}
	return nil
}

// indexPeers rebuilds peerAt from t.peers (called from the raft loop),
// keyed by the lower-cased address, as http.Transport lower-cases the host
// it dials.
func (t *Transport) indexPeers() {
	m := make(map[string][]uint64, len(t.peers))
	for id, p := range t.peers {
		a := strings.ToLower(*p.addr.Load())
		m[a] = append(m[a], id)
	}
	t.peerAt.Store(&m)
}

// SetPeer sets the address of peer id, starting its send queue if needed.
func (t *Transport) SetPeer(id uint64, addr string) {
	if id == t.cfg.NodeID {
		return
	}
	defer t.indexPeers()
	if p, ok := t.peers[id]; ok {
		p.addr.Store(&addr)
		return
	}
	p := &peer{t: t, id: id, queue: make(chan []byte, t.cfg.QueueSize), stop: make(chan struct{})}
	p.addr.Store(&addr)
	t.peers[id] = p
	t.wg.Add(1)
	go p.run()
}

// HasPeer reports whether peer id has an address.
func (t *Transport) HasPeer(id uint64) bool {
	_, ok := t.peers[id]
	return ok
}

// RemovePeer stops the send queue of peer id; queued messages are dropped.
func (t *Transport) RemovePeer(id uint64) {
	if p, ok := t.peers[id]; ok {
		close(p.stop)
		delete(t.peers, id)
		t.indexPeers()
	}
}

// Send marshals m and queues it for its peer without blocking. It returns
// false when the message cannot be sent (no address for the peer, its queue
// full, or the transport closed): the caller then reports the peer
// unreachable, or the snapshot failed for a MsgSnap. A MsgSnap is sent alone
// on its own goroutine and its outcome arrives on Reports.
func (t *Transport) Send(m *pb.Message) bool {
	select {
	case <-t.stop:
		return false
	default:
	}
	p, ok := t.peers[m.GetTo()]
	if !ok {
		return false
	}
	// Marshal here, in the raft loop, as etcd raft's doc.go asks: no entries
	// are persisted while the message is encoded.
	b, err := proto.Marshal(m)
	if err != nil {
		t.log.Error("marshal message", zap.Stringer("type", m.GetType()), zap.Error(err))
		return false
	}
	if m.GetType() == pb.MsgSnap {
		t.wg.Add(1)
		go t.sendSnapshot(p, b)
		return true
	}
	select {
	case p.queue <- b:
		return true
	default:
		return false
	}
}

// sendSnapshot posts one MsgSnap and reports its outcome (never dropped).
func (t *Transport) sendSnapshot(p *peer, b []byte) {
	defer t.wg.Done()
	err := t.post(p, [][]byte{b}, t.cfg.SnapshotTimeout)
	if err != nil {
		t.log.Warn("send snapshot", zap.Uint64("to", p.id), zap.Error(err))
	}
	select {
	case t.reports <- Report{To: p.id, Snapshot: true, Failed: err != nil}:
	case <-t.stop:
	}
}

// encodeBatch returns the wire form of a batch: uvarint length + message, each.
func encodeBatch(batch [][]byte) []byte {
	size := 0
	for _, b := range batch {
		size += protowire.SizeVarint(uint64(len(b))) + len(b)
	}
	body := make([]byte, 0, size)
	for _, b := range batch {
		body = protowire.AppendVarint(body, uint64(len(b)))
		body = append(body, b...)
	}
	return body
}

// newRequest builds a request with method to p at path with the sender
// headers.
func (t *Transport) newRequest(ctx context.Context, method string, p *peer, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, t.scheme+*p.addr.Load()+path, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-raft-messages")
	}
	req.Header.Set(headerTo, strconv.FormatUint(p.id, 10))
	req.Header.Set(headerFromID, t.cfg.ID)
	req.Header.Set(headerFromAddr, t.cfg.Addr)
	return req, nil
}

// post sends one batch to p in its own request and waits for the answer.
func (t *Transport) post(p *peer, batch [][]byte, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(t.ctx, timeout)
	defer cancel()
	req, err := t.newRequest(ctx, http.MethodPost, p, Path, bytes.NewReader(encodeBatch(batch)))
	if err != nil {
		return err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	stop := closeBodyOnDone(ctx, resp)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if !stop() {
		// The answer came before the receiver took the batch, which
		// it had not by the timeout: not delivered.
		return fmt.Errorf("transport: post to %d: %w", p.id, context.Cause(ctx))
	}
	switch resp.StatusCode {
	case http.StatusNoContent, http.StatusOK:
		return nil
	case http.StatusMisdirectedRequest:
		return fmt.Errorf("%w: %s is not raft node %d", ErrMisdirected, *p.addr.Load(), p.id)
	}
	return fmt.Errorf("transport: post to %d: %s", p.id, resp.Status)
}

// closeBodyOnDone closes resp's body once ctx is done, until the returned
// function is called. net/http's HTTP/2 client does not end a read of a
// response body when the request's context is cancelled while its request
// body's write waits for flow-control window (a receiver that answered and
// stopped reading: the context is only looked at between window grants);
// closing the response body aborts the stream, which ends both.
func closeBodyOnDone(ctx context.Context, resp *http.Response) (stop func() bool) {
	return context.AfterFunc(ctx, func() { _ = resp.Body.Close() })
}

// report queues r without blocking; it is dropped when the channel is full.
func (t *Transport) report(r Report) {
	select {
	case t.reports <- r:
	default:
	}
}

// sender returns the member id (the peer certificate's common name) and
// raft id r's messages are bound to, and whether they are bound (TLS with
// a Gate). An error wrapping peergate.ErrNotMember, logged and counted,
// when the certificate names no current member.
func (t *Transport) sender(r *http.Request) (cn string, raftID uint64, bound bool, err error) {
	if t.cfg.Gate == nil || r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return "", 0, false, nil
	}
	cn = r.TLS.PeerCertificates[0].Subject.CommonName
	if err := t.cfg.Gate.Check(cn); err != nil {
		t.cfg.Gate.Refuse(r.RemoteAddr, err)
		return cn, 0, true, err
	}
	return cn, t.cfg.RaftID(cn), true, nil
}

// checkSender fails with ErrForgedSender, logging and counting it, when m
// is not from want, the raft id of cn (the certificate of the connection
// from remote).
func (t *Transport) checkSender(remote, cn string, want uint64, m *pb.Message) error {
	if m.GetFrom() == want {
		return nil
	}
	err := fmt.Errorf("%w: from %d, certificate %q is %d", ErrForgedSender, m.GetFrom(), cn, want)
	t.log.Warn("refused peer message: sender is not the member its certificate names", zap.String("remote", remote), zap.Error(err))
	t.countError(remote, "identity")
	return err
}

// serveBatch receives one POSTed batch.
func (t *Transport) serveBatch(w http.ResponseWriter, r *http.Request) {
	if to, err := strconv.ParseUint(r.Header.Get(headerTo), 10, 64); err != nil || to != t.cfg.NodeID {
		http.Error(w, ErrMisdirected.Error(), http.StatusMisdirectedRequest)
		return
	}
	if r.ContentLength > int64(t.cfg.MaxMessageBytes) {
		t.countError(r.RemoteAddr, "oversize")
		http.Error(w, fmt.Sprintf("%v: batch of %d bytes", ErrTooLarge, r.ContentLength), http.StatusRequestEntityTooLarge)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(t.cfg.MaxMessageBytes)))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			t.countError(r.RemoteAddr, "oversize")
			http.Error(w, ErrTooLarge.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		t.countError(r.RemoteAddr, "read")
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	msgs, err := DecodeBatch(body)
	if err != nil {
		t.countError(r.RemoteAddr, "read")
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cn, want, bound, err := t.sender(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	kept := msgs[:0]
	for _, m := range msgs {
		if bound {
			if err := t.checkSender(r.RemoteAddr, cn, want, m); err != nil {
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
		}
		if m.GetTo() == t.cfg.NodeID {
			kept = append(kept, m)
		}
	}
	from := Sender{ID: r.Header.Get(headerFromID), Addr: r.Header.Get(headerFromAddr)}
	if err := t.cfg.Deliver(r.Context(), from, kept); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// serveStream receives a peer's message stream over HTTP/2 (the framing of
// the previous release's senders; upgrade.go has the current one): it
// answers 200 at once (so the sender's request returns while its body goes
// on), then reads messages until the stream ends (receive).
func (t *Transport) serveStream(w http.ResponseWriter, r *http.Request) {
	in, ok := t.acceptStream(w, r)
	if !ok {
		return
	}
	if in.bound {
		// The stream ends when cn's member is removed (Gate.Refresh).
		defer t.cfg.Gate.Track(in.cn, in.remote, func() { _ = r.Body.Close() })()
	}
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex() // HTTP/1 only; HTTP/2 streams are full duplex
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	// A stream on which nothing arrives for IdleTimeout is ended: the
	// sender's keepalive frames arrive four times as often.
	idle := time.AfterFunc(t.cfg.IdleTimeout, func() { _ = r.Body.Close() })
	defer idle.Stop()
	t.receive(r.Context(), bufio.NewReaderSize(&progressReader{r: r.Body, idle: idle, d: t.cfg.IdleTimeout}, 64<<10), in)
}

// inboundStream is what the receiving side knows of one message stream's
// sender: the remote address, the claimed Sender, and, over TLS with a
// Gate, the member its certificate names (cn) and that member's raft id
// (want), which every message's From must be (bound).
type inboundStream struct {
	remote string
	from   Sender
	cn     string
	want   uint64
	bound  bool
}

// acceptStream checks the request opening a message stream, in either
// framing: it answers 421 when this node is not the addressee, 403 when the
// peer certificate names no current member (sender), and false then;
// otherwise it returns the stream's sender, having written nothing.
func (t *Transport) acceptStream(w http.ResponseWriter, r *http.Request) (inboundStream, bool) {
	if to, err := strconv.ParseUint(r.Header.Get(headerTo), 10, 64); err != nil || to != t.cfg.NodeID {
		http.Error(w, ErrMisdirected.Error(), http.StatusMisdirectedRequest)
		return inboundStream{}, false
	}
	cn, want, bound, err := t.sender(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return inboundStream{}, false
	}
	return inboundStream{
		remote: r.RemoteAddr,
		from:   Sender{ID: r.Header.Get(headerFromID), Addr: r.Header.Get(headerFromAddr)},
		cn:     cn, want: want, bound: bound,
	}, true
}

// receive reads length-prefixed messages from br until it fails (the
// stream ended, a read timed out, or a message was refused: too large, over
// the budget, unparsable, or from another member than the certificate
// names), handing every run of messages that arrived together to Deliver
// with ctx. Refusals are logged and counted.
func (t *Transport) receive(ctx context.Context, br *bufio.Reader, in inboundStream) {
	var msgs []*pb.Message
	for {
		msgs = msgs[:0]
		for len(msgs) == 0 || (br.Buffered() > 0 && len(msgs) < 1024) {
			m, err := t.readMessage(br)
			if err != nil {
				switch {
				case errors.Is(err, ErrTooLarge), errors.Is(err, ErrBudget):
					t.log.Warn("refused peer stream", zap.String("remote", in.remote), zap.Error(err))
					t.countError(in.remote, "oversize")
				case errors.Is(err, ErrBadBatch):
					t.log.Warn("refused peer stream", zap.String("remote", in.remote), zap.Error(err))
					t.countError(in.remote, "read")
				case !errors.Is(err, io.EOF) && ctx.Err() == nil:
					t.log.Debug("read stream", zap.String("from", in.from.ID), zap.Error(err))
					t.countError(in.remote, "read")
				}
				return
			}
			if m.GetTo() != t.cfg.NodeID {
				continue // a keepalive frame, or a message for another node
			}
			if in.bound && t.checkSender(in.remote, in.cn, in.want, m) != nil {
				return
			}
			msgs = append(msgs, m)
		}
		if in.bound {
			// Removed since the stream opened, and Refresh not yet run.
			if err := t.cfg.Gate.Check(in.cn); err != nil {
				t.cfg.Gate.Refuse(in.remote, err)
				return
			}
		}
		if err := t.cfg.Deliver(ctx, in.from, slices.Clone(msgs)); err != nil {
			return
		}
	}
}

// progressReader resets idle to d each time bytes arrive.
type progressReader struct {
	r    io.Reader
	idle *time.Timer
	d    time.Duration
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.idle.Reset(p.d)
	}
	return n, err
}

// readMessage reads one uvarint-length-prefixed message from br. A declared
// length above Config.MaxMessageBytes fails with ErrTooLarge before
// anything is allocated; below it, the buffer grows by readChunk as bytes
// arrive, so a peer that declares a large message and sends little costs
// little, and each growth is taken from the budget shared by every inbound
// stream (Config.MaxBufferedBytes; ErrBudget past it), given back once the
// message is decoded. A zero length is a keepalive frame: an empty message
// addressed to nobody, which the caller drops.
func (t *Transport) readMessage(br *bufio.Reader) (*pb.Message, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, err
	}
	if n > uint64(t.cfg.MaxMessageBytes) {
		return nil, fmt.Errorf("%w: declared %d bytes, limit %d", ErrTooLarge, n, t.cfg.MaxMessageBytes)
	}
	var held int64
	defer func() { t.budget.Add(-held) }()
	b, err := readN(br, int(n), func(grow int) error {
		if t.budget.Add(int64(grow)) > t.cfg.MaxBufferedBytes {
			t.budget.Add(-int64(grow))
			return fmt.Errorf("%w: %d bytes buffered, limit %d", ErrBudget, t.budget.Load(), t.cfg.MaxBufferedBytes)
		}
		held += int64(grow)
		return nil
	})
	if err != nil {
		return nil, err
	}
	m := &pb.Message{}
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadBatch, err)
	}
	return m, nil
}

// readN reads exactly n bytes from r into a buffer grown readChunk at a time
// (doubling past it); take is asked for each growth, in bytes, before it
// is allocated, and its error ends the read. A short read is
// io.ErrUnexpectedEOF.
func readN(r io.Reader, n int, take func(grow int) error) ([]byte, error) {
	first := min(n, readChunk)
	if err := take(first); err != nil {
		return nil, err
	}
	b := make([]byte, 0, first)
	for len(b) < n {
		if len(b) == cap(b) {
			grow := min(n-len(b), max(len(b), readChunk))
			if err := take(grow); err != nil {
				return nil, err
			}
			b = slices.Grow(b, grow)
		}
		m, err := r.Read(b[len(b):min(cap(b), n)])
		b = b[:len(b)+m]
		if err != nil && len(b) < n {
			if errors.Is(err, io.EOF) {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return b, nil
}

// DecodeBatch parses a request body: repeated uvarint length + marshalled
// raftpb.Message. Errors wrap ErrBadBatch.
func DecodeBatch(body []byte) ([]*pb.Message, error) {
	var msgs []*pb.Message
	for len(body) > 0 {
		n, l := protowire.ConsumeVarint(body)
		if l < 0 || uint64(len(body)-l) < n {
			return nil, fmt.Errorf("%w: truncated message %d", ErrBadBatch, len(msgs))
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(body[l:l+int(n)], m); err != nil {
			return nil, fmt.Errorf("%w: message %d: %v", ErrBadBatch, len(msgs), err)
		}
		msgs = append(msgs, m)
		body = body[l+int(n):]
	}
	return msgs, nil
}

// Close stops serving, drops every queued message and waits for the
// transport's goroutines, accepted connections' included (at most half a
// second more, see connState). It is safe to call more than once.
func (t *Transport) Close() error {
	var err error
	t.closeOnce.Do(func() {
		close(t.stop)
		t.cancel()
		err = t.srv.Close()
		t.upgraded.closeAll()
		t.wg.Wait()
		t.client.CloseIdleConnections()
	})
	return err
}

// peer is one remote node's ordered send queue.
type peer struct {
	t      *Transport
	id     uint64
	addr   atomic.Pointer[string]
	queue  chan []byte
	stop   chan struct{}
	writes atomic.Int64 // batches written to streams (tests read it)
	// http2 is true while the peer's streams are the previous release's
	// HTTP/2 POST (it refused the upgrade); only the run goroutine uses it.
	http2 bool
}

// run sends the queue in batches over one long-lived stream, like
// rafthttp's streams: a batch costs one write on the open stream, not a
// request. A broken stream is reported unreachable and opened again on the
// next message, after a short pause.
func (p *peer) run() {
	defer p.t.wg.Done()
	var st stream
	defer func() {
		if st != nil {
			st.close()
		}
	}()
	var batch [][]byte
	keepalive := time.NewTicker(p.t.cfg.IdleTimeout / 4)
	defer keepalive.Stop()
	for {
		var first []byte
		select {
		case first = <-p.queue:
		case <-keepalive.C:
			// An empty frame, so the receiver's idle timeout never ends
			// a stream that is merely quiet (a follower's stream to
			// another follower between elections).
			if st != nil && st.write(keepaliveFrame) != nil {
				st.close()
				st = nil
			}
			continue
		case <-p.stop:
			return
		case <-p.t.stop:
			return
		}
		batch = append(batch[:0], first)
		size := len(first)
	drain:
		for size < p.t.cfg.MaxBatchBytes {
			select {
			case b := <-p.queue:
				batch = append(batch, b)
				size += len(b)
			default:
				break drain
			}
		}
		err := error(nil)
		if st == nil {
			st, err = p.t.openStream(p)
		}
		if err == nil {
			err = st.write(encodeBatch(batch))
			p.writes.Add(1)
			if err != nil {
				p.t.countError(*p.addr.Load(), "write")
			}
		}
		clear(batch)
		if err == nil {
			continue
		}
		p.t.log.Debug("send batch", zap.Uint64("to", p.id), zap.Int("messages", len(batch)), zap.Error(err))
		p.t.report(Report{To: p.id, Failed: true})
		if st != nil {
			st.close()
			st = nil
		}
		// Pause before dialling again, dropping what raft sends meanwhile:
		// an unreachable peer loses messages rather than receiving stale
		// ones when it comes back (raft resends what still matters).
		pause := time.NewTimer(redialBackoff)
	backoff:
		for {
			select {
			case <-p.queue:
			case <-pause.C:
				break backoff
			case <-p.stop:
				pause.Stop()
				return
			case <-p.t.stop:
				pause.Stop()
				return
			}
		}
	}
}

// keepaliveFrame is a zero-length message: it decodes to an empty
// raftpb.Message addressed to no node, which every receiver drops.
var keepaliveFrame = []byte{0}

// stream is one open message stream to a peer: the upgraded connection
// (connStream, upgrade.go) or, to a node of the previous release, an
// HTTP/2 POST (h2Stream).
type stream interface {
	// write sends body; an error means the stream is broken.
	write(body []byte) error
	// close ends the stream and waits for its goroutine.
	close()
}

// openStream opens p's message stream: an upgraded connection, or, when
// p refuses the upgrade (a node of the previous release: it negotiated
// HTTP/2 by ALPN, or answered 404 or 405), the HTTP/2 POST stream that
// release reads. Every open tries the upgrade first, so a peer that is
// upgraded in place gets the upgraded stream at the first reconnect.
func (t *Transport) openStream(p *peer) (stream, error) {
	cs, err := t.openConnStream(p)
	if err == nil {
		if p.http2 {
			p.http2 = false
			t.log.Info("peer takes the upgraded message stream", zap.Uint64("to", p.id))
		}
		return cs, nil
	}
	if !errors.Is(err, errUpgradeRefused) {
		return nil, err
	}
	if !p.http2 {
		p.http2 = true
		t.log.Info("peer refused the upgraded message stream; sending over HTTP/2 (previous release)",
			zap.Uint64("to", p.id), zap.Error(err))
	}
	hs, err := t.openH2Stream(p)
	if err != nil {
		return nil, err
	}
	return hs, nil
}

// h2Stream is a message stream over HTTP/2: one POST whose request body
// (pw) stays open.
type h2Stream struct {
	pw      *io.PipeWriter
	cancel  context.CancelFunc
	timeout time.Duration // bounds one write: Config.SendTimeout
	done    chan struct{} // closed when the request goroutine has finished
}

// openH2Stream starts the streaming POST to p and waits for the receiver's
// 200.
func (t *Transport) openH2Stream(p *peer) (*h2Stream, error) {
	ctx, cancel := context.WithCancel(t.ctx)
	pr, pw := io.Pipe()
	req, err := t.newRequest(ctx, http.MethodPost, p, StreamPath, pr)
	if err != nil {
		cancel()
		return nil, err
	}
	st := &h2Stream{pw: pw, cancel: cancel, timeout: t.cfg.SendTimeout, done: make(chan struct{})}
	opened := make(chan error, 1)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer close(st.done)
		resp, err := t.client.Do(req)
		if err != nil {
			opened <- err
			_ = pr.CloseWithError(err)
			return
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			err := fmt.Errorf("transport: stream to %d: %s", p.id, resp.Status)
			if resp.StatusCode == http.StatusMisdirectedRequest {
				err = fmt.Errorf("%w: %s is not raft node %d", ErrMisdirected, *p.addr.Load(), p.id)
			}
			opened <- err
			_ = pr.CloseWithError(err)
			return
		}
		opened <- nil
		// The receiver never answers more; hold the stream until it ends
		// (close, Close: ctx).
		defer closeBodyOnDone(ctx, resp)()
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		_ = pr.CloseWithError(io.ErrClosedPipe)
	}()
	timer := time.NewTimer(t.cfg.SendTimeout)
	defer timer.Stop()
	select {
	case err := <-opened:
		if err != nil {
			st.close()
			return nil, err
		}
		return st, nil
	case <-timer.C:
		st.close()
		return nil, fmt.Errorf("transport: open stream to %d: timed out", p.id)
	}
}

// write sends body on the stream; it returns once the HTTP/2 transport has
// taken all of it (a broken stream returns an error). A receiver that
// stops granting flow-control window would hold the write, and with it
// the peer's goroutine (its keepalives, RemovePeer, a new address), for
// as long as it likes: past Config.SendTimeout the stream is ended and
// the write fails, as an upgraded stream's write does by its deadline.
func (s *h2Stream) write(body []byte) error {
	timer := time.AfterFunc(s.timeout, func() {
		_ = s.pw.CloseWithError(fmt.Errorf("transport: stream write not taken within %v", s.timeout))
		s.cancel()
	})
	defer timer.Stop()
	_, err := s.pw.Write(body)
	return err
}

// close ends the stream and waits for its request goroutine.
func (s *h2Stream) close() {
	_ = s.pw.Close()
	s.cancel()
	<-s.done
}
