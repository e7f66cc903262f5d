package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/forward"
	"github.com/ticketd/ticketd/server/lessor"
	"github.com/ticketd/ticketd/server/waitq"
)

// Sentinel errors of package server. Compare with errors.Is; errmap.go turns
// them into connect codes.
var (
	// ErrNotFound: no lock is held on the key with the given token (Release).
	ErrNotFound = errors.New("ticketd: no lock with that token")
	// ErrTooManyLocks: the lock table holds limits.max_locks locks.
	ErrTooManyLocks = errors.New("ticketd: lock table full")
	// ErrNoMember: the request names a member id that is not in the configuration.
	ErrNoMember = errors.New("ticketd: no such member")
)

// Backend is what a consensus backend provides to a Node.
type Backend interface {
	core.Consensus
	core.Membership
}

// BackendFactory builds a backend from its config (hashicorp.New, etcd.New, or
// a test stand-in).
type BackendFactory func(backends.Config) (Backend, error)

// Option configures New for rarely-set knobs (connect-go style).
type Option func(*options)

type options struct {
	logger     *zap.Logger
	clock      lessor.Clock
	registry   *prometheus.Registry
	factory    BackendFactory
	editConfig func(*backends.Config)
	leaderWait time.Duration
}

// WithLogger sets the logger; the default is zap.NewNop().
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.logger = l } }

// WithClock sets the lessor's clock (tests); the default is the system clock.
func WithClock(c lessor.Clock) Option { return func(o *options) { o.clock = c } }

// WithRegistry sets the Prometheus registry the node's metrics go to and
// /metrics serves; the default is a fresh registry per node.
func WithRegistry(r *prometheus.Registry) Option { return func(o *options) { o.registry = r } }

// WithBackend replaces the backend chosen by config.Backend (tests).
func WithBackend(f BackendFactory) Option { return func(o *options) { o.factory = f } }

// WithBackendConfig lets the caller edit the backend config before the
// backend is built (tests: fault-injection hooks such as DropMessage).
func WithBackendConfig(fn func(*backends.Config)) Option {
	return func(o *options) { o.editConfig = fn }
}

// WithLeaderWait sets how long a request waits for an election in progress
// (or this node's own promotion) before failing with Unavailable; default 3s,
// always bounded by the request's deadline.
func WithLeaderWait(d time.Duration) Option { return func(o *options) { o.leaderWait = d } }

// compressMinBytes is the smallest message connect compresses (bytes).
const compressMinBytes = 4096

// maxRequestBytes bounds a request message (bytes); larger ones are refused
// with ResourceExhausted before they are decoded.
const maxRequestBytes = 1 << 20

// proposeTimeout bounds proposals made on behalf of a client that may have
// gone (grants, ghost releases, member updates), detached from its context.
const proposeTimeout = 10 * time.Second

// Node is one ticketd server: the lock table (a core.StateMachine replicated by
// the consensus backend), the leader's lessor and wait queues, and the Connect
// API (LockService, ClusterService, gRPC health, reflection, /metrics) on one
// HTTP port serving HTTP/1.1 and h2c.
//
// A Node is safe for concurrent use. Build it with New, serve with Serve,
// stop with Close.
type Node struct {
	cfg  config.Config
	log  *zap.Logger
	sm   *core.StateMachine
	raft Backend // set once, before ready is closed

	ready chan struct{} // closed once raft is set
	life  context.Context
	stop  context.CancelFunc
	bg    sync.WaitGroup // background proposals (ghost releases, member updates)

	lessor *lessor.Lessor
	queue  *waitq.Queue
	fwd    *forward.Forwarder
	health *grpchealth.StaticChecker
	met    *metrics

	leaderWait time.Duration

	roleMu   sync.Mutex
	promoted bool        // IsLeader event seen and not superseded
	leader   core.Member // last leader reported by an event
	term     uint64
	changed  chan struct{} // closed and replaced on every leader event
	closing  bool

	ghostMu sync.Mutex
	ghosts  map[string]uint64 // key -> token of a ghost Release in flight (leader-local)

	server    *http.Server
	closeOnce sync.Once
	closeErr  error
	served    atomic.Bool
}

// New builds a Node from cfg: it validates cfg, opens the backend (which
// recovers from cfg.DataDir or bootstraps), and prepares the API handler. It
// does not listen; call Serve. Errors: cfg.Validate's, the backend's.
func New(cfg config.Config, opts ...Option) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := options{leaderWait: 3 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = zap.NewNop()
	}
	if o.registry == nil {
		o.registry = prometheus.NewRegistry()
	}
	if o.factory == nil {
		o.factory = backendFactory(cfg.Backend)
	}
	life, stop := context.WithCancel(context.Background())
	n := &Node{
		cfg:   cfg,
		log:   o.logger.With(zap.String("node", cfg.ID)),
		sm:    core.NewStateMachine(),
		ready: make(chan struct{}),
		life:  life,
		stop:  stop,
		fwd: forward.New(forward.Config{Self: cfg.ID, Options: []connect.ClientOption{
			connect.WithCompressMinBytes(compressMinBytes),
		}}),
		health:     grpchealth.NewStaticChecker(ticketv1connect.LockServiceName, ticketv1connect.ClusterServiceName),
		leaderWait: o.leaderWait,
		changed:    make(chan struct{}),
		ghosts:     map[string]uint64{},
	}
	var err error
	n.lessor, err = lessor.New(lessor.Config{
		Clock:   o.clock,
		Confirm: n.readIndex,
		Expire:  n.proposeExpire,
		Logger:  n.log.Named("lessor"),
	})
	if err != nil {
		stop()
		return nil, err
	}
	n.queue, err = waitq.New(waitq.Config{State: n.keyState, MaxWaiters: cfg.Limits.MaxWaitersPerKey})
	if err != nil {
		stop()
		_ = n.lessor.Close()
		return nil, err
	}
	n.met, err = newMetrics(o.registry, n)
	if err != nil {
		stop()
		_ = n.lessor.Close()
		return nil, err
	}

	bcfg := backends.Config{
		ID:                cfg.ID,
		RaftAddr:          cfg.RaftAddr,
		DataDir:           cfg.DataDir,
		Bootstrap:         cfg.Members(),
		StateMachine:      n.sm,
		OnApply:           n.onApply,
		OnLeaderChange:    n.onLeaderChange,
		SnapshotThreshold: cfg.Raft.SnapshotThreshold,
		HeartbeatInterval: time.Duration(cfg.Raft.HeartbeatMS) * time.Millisecond,
		ElectionTimeout:   time.Duration(cfg.Raft.ElectionTimeoutMS) * time.Millisecond,
		Logger:            o.logger.Named("raft"), // the backend adds the node id itself
	}
	if o.editConfig != nil {
		o.editConfig(&bcfg)
	}
	b, err := o.factory(bcfg)
	if err != nil {
		stop()
		_ = n.lessor.Close()
		return nil, fmt.Errorf("backend %s: %w", cfg.Backend, err)
	}
	n.raft = b
	close(n.ready)

	if cfg.Join != "" && !n.IsMember() {
		n.bg.Add(1)
		go n.join()
	}
	n.server = &http.Server{
		Handler:           n.handler(o.registry),
		Protocols:         protocols(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          zap.NewStdLog(n.log.Named("http")),
	}
	return n, nil
}

// protocols is HTTP/1.1 plus unencrypted HTTP/2 (h2c with prior knowledge),
// so Connect, gRPC and gRPC-Web clients share one port without TLS.
func protocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &p
}

// handler builds the HTTP mux: both services, health, reflection, metrics.
func (n *Node) handler(reg *prometheus.Registry) http.Handler {
	opts := []connect.HandlerOption{
		connect.WithInterceptors(n.met.interceptor(), loggingInterceptor(n.log.Named("rpc"))),
		connect.WithRecover(n.recoverPanic),
		// Replies are tens of bytes: gzip would cost more CPU than it saves.
		connect.WithCompressMinBytes(compressMinBytes),
		connect.WithReadMaxBytes(maxRequestBytes),
	}
	mux := http.NewServeMux()
	mux.Handle(ticketv1connect.NewLockServiceHandler(&lockService{n: n}, opts...))
	mux.Handle(ticketv1connect.NewClusterServiceHandler(&clusterService{n: n}, opts...))
	mux.Handle(grpchealth.NewHandler(n.health))
	reflector := grpcreflect.NewStaticReflector(
		ticketv1connect.LockServiceName,
		ticketv1connect.ClusterServiceName,
		grpchealth.HealthV1ServiceName,
	)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}

func (n *Node) recoverPanic(_ context.Context, spec connect.Spec, _ http.Header, p any) error {
	n.log.Error("handler panic", zap.String("procedure", spec.Procedure), zap.Any("panic", p), zap.StackSkip("stack", 3))
	return connect.NewError(connect.CodeInternal, errors.New("internal error"))
}

// Handler returns the node's HTTP handler (the API, health, reflection and
// /metrics), for callers that run their own http.Server.
func (n *Node) Handler() http.Handler { return n.server.Handler }

// ID returns the node id.
func (n *Node) ID() string { return n.cfg.ID }

// join asks the member at cfg.Join (which forwards to its leader) to add this
// node as a voter with its addresses, retrying every second until it succeeds
// or the node closes. A node that is already a member never calls it.
func (n *Node) join() {
	defer n.bg.Done()
	client := ticketv1connect.NewClusterServiceClient(n.fwd.HTTPClient(), "http://"+n.cfg.Join)
	req := &ticketv1.AddMemberRequest{Member: &ticketv1.Member{Id: n.cfg.ID, RaftAddr: n.cfg.RaftAddr, ApiAddr: n.cfg.APIAddr, Voter: true}}
	for {
		ctx, cancel := context.WithTimeout(n.life, proposeTimeout)
		_, err := client.AddMember(ctx, req)
		cancel()
		if err == nil {
			n.log.Info("joined the cluster", zap.String("via", n.cfg.Join))
			return
		}
		n.log.Warn("join failed; retrying", zap.String("via", n.cfg.Join), zap.Error(err))
		select {
		case <-n.life.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// IsMember reports whether this node is in the Raft configuration it knows
// (false for a new node waiting to be added through join).
func (n *Node) IsMember() bool { return n.hasMember(n.cfg.ID) }

// Serve accepts API connections on l until Close. It returns
// http.ErrServerClosed after Close. Only one Serve call is allowed.
func (n *Node) Serve(l net.Listener) error {
	if !n.served.CompareAndSwap(false, true) {
		return errors.New("ticketd: Serve called twice")
	}
	return n.server.Serve(l)
}

// Close shuts the node down gracefully: health turns NOT_SERVING, waiting
// Acquire requests fail with Unavailable, a leader hands leadership to another
// voter (best effort, so clients fail over at once), in-flight requests finish
// (up to ctx's deadline), and the backend closes. Safe to call more than once.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		n.health.SetStatus(ticketv1connect.LockServiceName, grpchealth.StatusNotServing)
		n.health.SetStatus(ticketv1connect.ClusterServiceName, grpchealth.StatusNotServing)
		n.roleMu.Lock()
		n.closing = true
		wasLeader := n.promoted
		n.roleMu.Unlock()
		n.queue.Close()
		if wasLeader && len(n.raft.Status().Members) > 1 {
			tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			if err := n.raft.TransferLeadership(tctx, ""); err != nil {
				n.log.Info("leadership transfer on shutdown failed", zap.Error(err))
			}
			cancel()
		}
		if err := n.server.Shutdown(ctx); err != nil {
			_ = n.server.Close()
		}
		n.stop()
		_ = n.lessor.Close()
		n.bg.Wait()
		n.closeErr = n.raft.Close()
		n.fwd.Close()
	})
	return n.closeErr
}

// backend returns the consensus backend, waiting until New has set it; nil
// when the node is closing first.
func (n *Node) backend() Backend {
	select {
	case <-n.ready:
		return n.raft
	case <-n.life.Done():
		return nil
	}
}

// readIndex is the lessor's quorum confirmation.
func (n *Node) readIndex(ctx context.Context) error {
	b := n.backend()
	if b == nil {
		return core.ErrStopped
	}
	return b.ReadIndex(ctx)
}

// proposeExpire is the lessor's Expire proposal.
func (n *Node) proposeExpire(ctx context.Context, key string, token uint64) error {
	b := n.backend()
	if b == nil {
		return core.ErrStopped
	}
	res, err := b.Propose(ctx, core.Expire(key, token))
	if err == nil && res.Existed {
		n.met.expired.Inc()
		n.log.Debug("lease expired", zap.String("key", key), zap.Uint64("token", token))
	}
	return err
}

// keyState is the wait queue's view of key: its holder in the lock table, and
// whether that holder is being removed (an Expire or ghost Release in flight).
func (n *Node) keyState(key string) waitq.KeyState {
	lk, ok := n.sm.Get(key)
	if !ok {
		return waitq.KeyState{}
	}
	return waitq.KeyState{
		Held:     true,
		Owner:    lk.Owner,
		Removing: n.lessor.Expiring(key, lk.Token) || n.isGhost(key, lk.Token),
	}
}

func (n *Node) isGhost(key string, token uint64) bool {
	n.ghostMu.Lock()
	defer n.ghostMu.Unlock()
	t, ok := n.ghosts[key]
	return ok && t == token
}

// onApply is the backend's OnApply hook: it keeps the lessor's leases and the
// wait queues in step with the lock table. It never blocks and never proposes.
func (n *Node) onApply(_ uint64, cmd core.Command, res core.Result) {
	switch cmd.Op {
	case core.OpGrant:
		if res.Outcome == core.OutcomeGranted {
			n.lessor.Granted(cmd.Key, res.Token, res.LeaseMS)
		}
	case core.OpRelease, core.OpExpire:
		n.lessor.Removed(cmd.Key, cmd.Token)
		n.ghostMu.Lock()
		if t, ok := n.ghosts[cmd.Key]; ok && t == cmd.Token {
			delete(n.ghosts, cmd.Key)
		}
		n.ghostMu.Unlock()
		n.queue.Kick(cmd.Key)
	}
}

// onLeaderChange is the backend's OnLeaderChange hook. On promotion (after the
// barrier applied) the lessor becomes primary with fresh deadlines and the
// wait queues open; on any other change both stop, failing every waiter with
// Unavailable (DESIGN.md, Leases; etcd lessor Promote/Demote).
func (n *Node) onLeaderChange(ev core.LeaderEvent) {
	n.roleMu.Lock()
	closing := n.closing
	if !ev.IsLeader || closing {
		n.promoted = false
	}
	n.leader = ev.Leader
	n.term = ev.Term
	n.roleMu.Unlock()

	n.ghostMu.Lock()
	n.ghosts = map[string]uint64{}
	n.ghostMu.Unlock()
	if ev.IsLeader && !closing {
		n.lessor.Promote(n.sm)
		n.queue.Open()
		n.roleMu.Lock()
		n.promoted = n.term == ev.Term // a later event may have superseded this one
		n.roleMu.Unlock()
		n.bg.Add(1)
		go n.ensureMembers(ev.Term)
	} else {
		n.lessor.Demote()
		n.queue.Close()
	}
	n.roleMu.Lock()
	close(n.changed)
	n.changed = make(chan struct{})
	n.roleMu.Unlock()
	n.log.Info("leadership changed", zap.Bool("leader", ev.IsLeader), zap.String("leader_id", ev.Leader.ID), zap.Uint64("term", ev.Term))
}

// stillLeader reports whether this node is the promoted leader of term.
func (n *Node) stillLeader(term uint64) bool {
	n.roleMu.Lock()
	defer n.roleMu.Unlock()
	return n.promoted && n.term == term && !n.closing
}

// ensureMembers makes the replicated member directory hold this node's API
// address, and the bootstrap peers' when missing, retrying while this node
// leads term.
func (n *Node) ensureMembers(term uint64) {
	defer n.bg.Done()
	b := n.backend()
	if b == nil {
		return
	}
	want := map[string]string{}
	for _, m := range n.cfg.Members() {
		if _, ok := n.sm.MemberAPIAddr(m.ID); !ok {
			want[m.ID] = m.APIAddr
		}
	}
	want[n.cfg.ID] = n.cfg.APIAddr
	for id, addr := range want {
		for n.stillLeader(term) {
			if got, _ := n.sm.MemberAPIAddr(id); got == addr {
				break
			}
			ctx, cancel := context.WithTimeout(n.life, proposeTimeout)
			_, err := b.Propose(ctx, core.SetMember(id, addr))
			cancel()
			if err == nil {
				n.log.Info("member API address recorded", zap.String("member", id), zap.String("api_addr", addr))
				break
			}
			n.log.Debug("recording member API address failed", zap.String("member", id), zap.Error(err))
			select {
			case <-n.life.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// leaderMember returns the leader this node knows of, with its API address
// from the member directory (empty when not recorded yet).
func (n *Node) leaderMember() (core.Member, bool) {
	b := n.backend()
	if b == nil {
		return core.Member{}, false
	}
	m, ok := b.Leader()
	if ok && m.APIAddr == "" {
		m.APIAddr, _ = n.sm.MemberAPIAddr(m.ID)
	}
	return m, ok
}

// route decides where a leader-only request is served: locally (true) when
// this node is the promoted leader, else at the returned leader (API address
// known). It waits up to the leader wait, bounded by ctx, for an election in
// progress, this node's own promotion, or the leader's API address to be
// known. A request forwarded by another node is never forwarded again: it
// gets a *core.NotLeaderError at once when another node leads.
func (n *Node) route(ctx context.Context) (core.Member, bool, error) {
	n.roleMu.Lock()
	promoted, closing := n.promoted, n.closing
	n.roleMu.Unlock()
	if promoted && !closing {
		return core.Member{}, true, nil // the hot path: no timer, no lookups
	}
	timer := time.NewTimer(n.leaderWait)
	defer timer.Stop()
	forwarded := forward.Forwarded(ctx)
	for {
		n.roleMu.Lock()
		promoted, changed, closing := n.promoted, n.changed, n.closing
		n.roleMu.Unlock()
		if closing {
			return core.Member{}, false, core.ErrStopped
		}
		if promoted {
			return core.Member{}, true, nil
		}
		leader, ok := n.leaderMember()
		if ok && leader.ID != n.cfg.ID {
			if forwarded {
				return core.Member{}, false, &core.NotLeaderError{Leader: leader}
			}
			if leader.APIAddr != "" {
				return leader, false, nil
			}
		}
		select {
		case <-changed:
		case <-time.After(20 * time.Millisecond):
		case <-timer.C:
			return core.Member{}, false, &core.NotLeaderError{Leader: leader}
		case <-ctx.Done():
			return core.Member{}, false, ctx.Err()
		}
	}
}

// newOwner returns a unique owner id for a request that gave none.
func (n *Node) newOwner() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return n.cfg.ID + "-" + hex.EncodeToString(b[:])
}

// acquire serves Acquire on the promoted leader: the wait queue gives the turn
// to propose, then the grant is proposed (group-committed with others).
func (n *Node) acquire(ctx context.Context, key string, leaseMS int64, owner string, wait bool) (core.Result, error) {
	confirmed := false
	for {
		if lim := n.cfg.Limits.MaxLocks; lim > 0 {
			if _, held := n.sm.Get(key); !held && n.sm.Len()+n.queue.Inflight() >= lim {
				return core.Result{}, fmt.Errorf("%w: %d locks", ErrTooManyLocks, lim)
			}
		}
		turn, err := n.queue.Enter(ctx, key, owner, wait)
		if errors.Is(err, waitq.ErrHeld) && !confirmed {
			// "Held" was read from this node's table, which is stale on a
			// deposed leader (paused or cut off while its successor released
			// the key). Refuse only after a quorum confirms leadership and the
			// table has applied everything committed (ReadIndex), then look again.
			if err := n.raft.ReadIndex(ctx); err != nil {
				return core.Result{}, err
			}
			confirmed = true
			continue
		}
		if err != nil {
			return core.Result{}, err
		}
		res, err := n.grant(ctx, turn, core.Grant(key, leaseMS, owner))
		if err != nil || res.Outcome == core.OutcomeGranted {
			return res, err
		}
		// GrantRejected: the table held key after all (a grant proposed in an
		// earlier term committed late). Defensive; wait again or refuse.
		if !wait {
			return core.Result{}, fmt.Errorf("%w: %q", waitq.ErrHeld, key)
		}
	}
}

// Claim states of one grant proposal: the client takes the result, or the
// client left first and the grant, if it applies, is a ghost.
const (
	claimPending int32 = iota
	claimDelivered
	claimAbandoned
)

// grant proposes cmd with the turn, detached from ctx so that the outcome is
// always known: if the client is gone by the time the grant applies, the lock
// is released at once (a ghost lock; DESIGN.md, Leases), and a retry by the
// same owner waits for that release (the ghost is marked before the turn ends).
func (n *Node) grant(ctx context.Context, turn *waitq.Turn, cmd core.Command) (core.Result, error) {
	type outcome struct {
		res core.Result
		err error
	}
	var claim atomic.Int32
	out := make(chan outcome, 1)
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		pctx, cancel := context.WithTimeout(n.life, proposeTimeout)
		res, err := n.raft.Propose(pctx, cmd)
		cancel()
		if err == nil && res.Outcome == core.OutcomeGranted && !claim.CompareAndSwap(claimPending, claimDelivered) {
			n.ghostMu.Lock()
			n.ghosts[cmd.Key] = res.Token
			n.ghostMu.Unlock()
			turn.Done()
			n.met.ghosts.Inc()
			n.log.Debug("ghost lock: client gone before its grant applied", zap.String("key", cmd.Key), zap.Uint64("token", res.Token))
			n.releaseGhost(cmd.Key, res.Token)
		} else {
			turn.Done()
		}
		out <- outcome{res, err}
	}()
	select {
	case o := <-out:
		return o.res, o.err
	case <-ctx.Done():
		if claim.CompareAndSwap(claimPending, claimAbandoned) {
			return core.Result{}, ctx.Err()
		}
		o := <-out
		return o.res, o.err
	}
}

// releaseGhost proposes Release{key, token} until it applies, this node stops
// leading, or the node closes.
func (n *Node) releaseGhost(key string, token uint64) {
	for n.isGhost(key, token) {
		ctx, cancel := context.WithTimeout(n.life, proposeTimeout)
		_, err := n.raft.Propose(ctx, core.Release(key, token))
		cancel()
		if err == nil || errors.Is(err, core.ErrNotLeader) || errors.Is(err, core.ErrStopped) || n.life.Err() != nil {
			return
		}
		n.log.Debug("ghost release failed; retrying", zap.String("key", key), zap.Error(err))
		select {
		case <-n.life.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}
