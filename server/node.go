package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/applytime"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/forward"
	"github.com/ticketd/ticketd/server/httpapi"
	"github.com/ticketd/ticketd/server/lessor"
	"github.com/ticketd/ticketd/server/security"
	"github.com/ticketd/ticketd/server/waitq"
	"github.com/ticketd/ticketd/server/watch"
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
	// peerCallLimit bounds the writing of a PeerService answer
	// (WithPeerCallLimit).
	peerCallLimit time.Duration
	// bootstrapWait bounds checkNotBootstrapped (WithBootstrapProbeWait).
	bootstrapWait time.Duration
	// host and hasLog replace the apply-time record's host clock and its
	// test for Raft state in the data dir (applytimes.go), for tests whose
	// backend keeps its log elsewhere and whose clock is fake.
	host   applytime.Host
	hasLog func(dir string) bool
	// commandVersion is what the node publishes as the highest command
	// version it applies (WithCommandVersion).
	commandVersion byte
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

// WithPeerCallLimit sets how long a PeerService answer (a voter's lease
// reports, leasereport.go) may take to write before its stream is reset;
// default 15 s (reportSendLimit). Tests shorten it to see a stalled reader
// cut without waiting that long.
func WithPeerCallLimit(d time.Duration) Option { return func(o *options) { o.peerCallLimit = d } }

// WithCommandVersion sets the highest command version the node says it
// applies (StatusResponse.max_command_version), as a node of an older
// binary would say, for tests of the leader's cluster command version
// (commandversion.go): it changes what the node publishes, what its own
// leader counts for it and which members its AddMember admits, never what
// its state machine decodes. The default, and the largest allowed, is
// core.MaxCommandVersion.
func WithCommandVersion(v byte) Option { return func(o *options) { o.commandVersion = v } }

// maxWaitersTotal caps waiting Acquire requests over all keys (waitq
// MaxWaitersTotal); 0 means no cap. It becomes the config key
// limits.max_waiters once server/config has it
// (docs/design.md#limits-and-quotas).
const maxWaitersTotal = 0

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
	times  *applytime.Record // when this node applied each index, across restarts (nil: none)
	queue  *waitq.Queue
	fwd    *forward.Forwarder
	hub    *watch.Hub // watch events, fed by onApply (watchservice.go)
	met    *metrics

	// kaStreams counts the KeepAliveStream streams open on this node and
	// ends them when it closes (keepalivestream.go).
	kaStreams keepAliveStreams

	proposeTimeout time.Duration  // proposeTimeout; tests shorten it
	bounds         proposalBounds // the shared bounds of detached proposals (proposalbound.go)
	role           *role          // promoted, term, closing, the leader wait (role.go)

	// joinMembers holds the ids of the members the --join member named
	// (learnPeers): whom a node in no configuration yet takes for members
	// (hasMember). Nil until a join answer arrives.
	joinMembers atomic.Pointer[[]string]
	// lead is what the promoted leader has in flight to admit requests
	// against limits and quotas, and its KeepAlive rounds (leaderstate.go).
	lead leaderState
	// commandVersion is the highest command version this node says it
	// applies (core.MaxCommandVersion unless WithCommandVersion), and
	// versions what the promoted leader knows of every member's
	// (commandversion.go).
	commandVersion byte
	versions       commandVersions

	// http is the HTTP side: the API's and the metrics listener's
	// servers, TLS, limits, CORS, health and probes (package httpapi,
	// built by secure.go).
	http *httpapi.Server
	// peerCert is the peer certificate and revocation list (peer TLS;
	// nil without it), reloaded; secure.go sets it.
	peerCert *security.Reloader
	fatal    failStop // first fatal backend error (failstop.go)
}

// New builds a Node from cfg: it validates cfg, opens the backend (which
// recovers from cfg.DataDir or bootstraps), and prepares the API handler. It
// does not listen; call Serve. Errors: cfg.Validate's, the backend's, a
// full disk in the data dir (openApplyTimes: it says "disk full").
func New(cfg config.Config, opts ...Option) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := options{leaderWait: 3 * time.Second, peerCallLimit: reportSendLimit, bootstrapWait: DefaultBootstrapProbeWait,
		commandVersion: core.MaxCommandVersion}
	if cfg.BootstrapProbeWaitMS > 0 {
		o.bootstrapWait = time.Duration(cfg.BootstrapProbeWaitMS) * time.Millisecond
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.commandVersion < core.CommandVersion || o.commandVersion > core.MaxCommandVersion {
		return nil, fmt.Errorf("command version %d: this build applies versions %d to %d", o.commandVersion, core.CommandVersion, core.MaxCommandVersion)
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
			connect.WithCompressMinBytes(httpapi.CompressMinBytes),
		}}),
		proposeTimeout: proposeTimeout,
		role:           newRole(o.leaderWait),
		commandVersion: o.commandVersion,
	}
	var err error
	if n.times, err = openApplyTimes(cfg, o, n.log); err != nil {
		stop()
		return nil, err
	}
	n.lessor, err = lessor.New(lessor.Config{
		Clock:   o.clock,
		Confirm: n.confirmTerm,
		Expire:  n.proposeExpire,
		// a session's lease running out ends it in one entry
		// (docs/design.md#sessions)
		ExpireSession: n.proposeExpireSession,
		OnDelayEnd:    n.onDelayEnd,
		Logger:        n.log.Named("lessor"),
		// a restarted node measures the leases it replays from its earlier
		// run's apply (docs/design.md#leases)
		AppliedAt: n.times.At,
	})
	if err != nil {
		stop()
		_ = n.times.Close()
		return nil, err
	}
	n.hub, err = watch.New(watch.Config{
		MaxHistoryEntries: cfg.Limits.WatchHistoryEntries, MaxHistoryBytes: cfg.Limits.WatchHistoryBytes,
		MaxWatchers: cfg.Limits.MaxWatchers, BufferEvents: cfg.Limits.WatchBufferEvents, Applied: n.sm.AppliedIndex,
	})
	if err != nil {
		stop()
		_ = n.lessor.Close()
		_ = n.times.Close()
		return nil, err
	}
	n.queue, err = waitq.New(waitq.Config{State: n.keyState, MaxWaiters: cfg.Limits.MaxWaitersPerKey, MaxWaitersTotal: maxWaitersTotal})
	if err != nil {
		stop()
		_ = n.lessor.Close()
		_ = n.times.Close()
		return nil, err
	}
	n.met, err = newMetrics(o.registry, n)
	if err != nil {
		stop()
		_ = n.lessor.Close()
		_ = n.times.Close()
		return nil, err
	}

	bcfg := backends.Config{
		ID:              cfg.ID,
		RaftAddr:        cfg.RaftAddr,
		DataDir:         cfg.DataDir,
		LogStore:        cfg.Raft.LogStore,
		Bootstrap:       cfg.Members(),
		ForceNewCluster: cfg.ForceNewCluster,
		// A data dir with a log but no watermark is refused unless the
		// operator accepts it (docs/operations.md).
		AcceptMissingWatermark: cfg.AcceptMissingWatermark,
		StateMachine:           n.sm,
		OnApply:                n.onApply,
		OnRestore:              n.onRestore,
		OnLeaderChange:         n.met.cluster.countLeaderChanges(n.onLeaderChange),
		Observer:               n.met.cluster,
		SnapshotThreshold:      cfg.Raft.SnapshotThreshold,
		HeartbeatInterval:      time.Duration(cfg.Raft.HeartbeatMS) * time.Millisecond,
		ElectionTimeout:        time.Duration(cfg.Raft.ElectionTimeoutMS) * time.Millisecond,
		Logger:                 o.logger.Named("raft"), // the backend adds the node id itself
	}
	// An empty data dir is bootstrapped only if no other bootstrap member
	// knows this one (bootstrapcheck.go).
	bcfg.BeforeBootstrap = func() error { return n.checkNotBootstrapped(o.bootstrapWait) }
	api := httpapi.Config{
		Node:           n,
		LockService:    &lockService{n: n},
		ClusterService: &clusterService{n: n},
		PeerService:    &peerService{n: n},
		PeerCallLimit:  o.peerCallLimit,
		Config:         cfg,
		Metrics:        n.met.interceptor(),
		Registry:       o.registry,
		Workers:        httpapi.NewWorkerPool(),
		Log:            n.log,
		Life:           n.life,
	}
	if err := n.secure(&bcfg, api); err != nil {
		stop()
		_ = n.lessor.Close()
		_ = n.times.Close()
		return nil, err
	}
	if o.editConfig != nil {
		o.editConfig(&bcfg)
	}
	b, err := o.factory(bcfg)
	if err != nil {
		stop()
		_ = n.lessor.Close()
		_ = n.times.Close()
		return nil, fmt.Errorf("backend %s: %w", cfg.Backend, err)
	}
	n.raft = b
	close(n.ready)
	// Locks restored from a snapshot at open start at now + lease_ms; the
	// backend's restore hook normally reconciled already, so this reads the
	// table only if a restore went unreported.
	n.lessor.Resync(n.sm)

	if cfg.Join != "" && !n.IsMember() {
		n.bg.Add(1)
		go n.join()
	}
	return n, nil
}

// ID returns the node id.
func (n *Node) ID() string { return n.cfg.ID }

// join asks the member at cfg.Join (which forwards to its leader) to add this
// node as a voter with its addresses, retrying every second until it succeeds
// or the node closes. A node that is already a member never calls it.
func (n *Node) join() {
	defer n.bg.Done()
	client := ticketv1connect.NewClusterServiceClient(n.fwd.HTTPClient(), n.fwd.URL(n.cfg.Join))
	req := &ticketv1.AddMemberRequest{Member: &ticketv1.Member{Id: n.cfg.ID, RaftAddr: n.cfg.RaftAddr, ApiAddr: n.cfg.APIAddr, Voter: true}}
	for {
		ctx, cancel := context.WithTimeout(n.life, proposeTimeout)
		// Learn the members' raft addresses first: once added, this node
		// may be needed for quorum (a one-member cluster growing to two)
		// before the AddMember answer arrives, and it never takes a peer
		// address from a request header (backends.PeerLearner).
		if st, err := client.Status(ctx, &ticketv1.StatusRequest{}); err == nil {
			n.learnPeers(st.GetMembers())
		}
		resp, err := client.AddMember(ctx, req)
		cancel()
		if err == nil {
			n.log.Info("joined the cluster", zap.String("via", n.cfg.Join))
			n.learnPeers(resp.GetMembers())
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

// learnPeers records the members from the --join member's Status or
// AddMember answer (replicated membership, over the API) for hasMember, and
// hands them to a backend that needs them to answer its leader
// (backends.PeerLearner: the etcd backend never takes a peer address from a
// request header).
func (n *Node) learnPeers(members []*ticketv1.Member) {
	ms := make([]core.Member, 0, len(members))
	ids := make([]string, 0, len(members))
	for _, m := range members {
		ms = append(ms, core.Member{ID: m.GetId(), RaftAddr: m.GetRaftAddr(), APIAddr: m.GetApiAddr(), Voter: m.GetVoter()})
		ids = append(ids, m.GetId())
	}
	n.joinMembers.Store(&ids)
	pl, ok := n.raft.(backends.PeerLearner)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(n.life, proposeTimeout)
	defer cancel()
	if err := pl.LearnPeers(ctx, ms); err != nil {
		n.log.Warn("learn peer addresses from the join answer", zap.Error(err))
	}
}

// IsMember reports whether this node is in the Raft configuration it knows
// (false for a new node waiting to be added through join).
func (n *Node) IsMember() bool { return n.hasMember(n.cfg.ID) }

// Close shuts the node down gracefully: health turns NOT_SERVING, waiting
// Acquire requests fail with Unavailable, a leader hands leadership to another
// voter (best effort, so clients fail over at once), in-flight requests finish
// (up to ctx's deadline), and the backend closes. Safe to call more than once:
// the HTTP side runs these steps once around its own shutdown
// (httpapi.Server.Close) and every call returns the backend's Close error.
func (n *Node) Close(ctx context.Context) error {
	return n.http.Close(ctx, func() {
		wasLeader := n.role.close()
		n.queue.Close()
		n.hub.Close()          // Watch streams end (Unavailable) before Shutdown waits for them
		n.kaStreams.closeAll() // and so do keep-alive streams
		if wasLeader && len(n.raft.Status().Members) > 1 {
			tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			if err := n.raft.TransferLeadership(tctx, ""); err != nil {
				n.log.Info("leadership transfer on shutdown failed", zap.Error(err))
			}
			cancel()
		}
	}, func() error {
		n.stop()
		_ = n.lessor.Close()
		n.bg.Wait()
		err := n.raft.Close()
		_ = n.times.Close() // after the backend: no apply records any more
		n.fwd.Close()
		return err
	})
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
