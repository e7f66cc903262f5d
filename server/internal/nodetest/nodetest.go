package nodetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
)

// Option configures Start.
type Option func(*options)

type options struct {
	backend string
	editCfg func(i int, c *config.Config)
	opts    func(i int) []server.Option
	logs    bool
	client  []connect.ClientOption
	prepare func(i int, c config.Config) error
	later   map[int]bool // nodes Start does not start (WithLater)
}

// bootstrapProbeWait is the nodes' server.WithBootstrapProbeWait: Start
// starts them one after another, so a node that bootstraps waits this long
// for the later ones (accepted by their listeners, not served yet); node
// options can set another.
const bootstrapProbeWait = 300 * time.Millisecond

// WithLater leaves nodes idx out of Start, which waits for a leader among
// the others (they must form a quorum); Restart starts one later with its
// bootstrap config and an empty data dir, as a founding member that starts
// late.
func WithLater(idx ...int) Option {
	return func(o *options) {
		o.later = map[int]bool{}
		for _, i := range idx {
			o.later[i] = true
		}
	}
}

// WithBackend selects the backend by name (config.BackendHashicorp by default).
func WithBackend(name string) Option { return func(o *options) { o.backend = name } }

// WithConfig edits node i's config before it starts.
func WithConfig(fn func(i int, c *config.Config)) Option { return func(o *options) { o.editCfg = fn } }

// WithServerOptions adds server options for node i (a stand-in backend, a
// clock), a node added by Join too.
func WithServerOptions(fn func(i int) []server.Option) Option {
	return func(o *options) { o.opts = fn }
}

// WithClientOptions adds connect client options to every Instance's Lock
// and Cluster clients (an interceptor that sends a bearer token, for a
// cluster with authorization on: WaitLeader's Status calls need one).
func WithClientOptions(opts ...connect.ClientOption) Option {
	return func(o *options) { o.client = append(o.client, opts...) }
}

// WithPrepare runs fn on node i's final config before the node starts for
// the first time (to write its data dir, e.g. server.Restore of a snapshot);
// an error fails the test.
func WithPrepare(fn func(i int, c config.Config) error) Option {
	return func(o *options) { o.prepare = fn }
}

// WithLogs sends the nodes' logs (debug level) to t.Log.
func WithLogs() Option { return func(o *options) { o.logs = true } }

// Instance is one node of a Cluster.
type Instance struct {
	ID      string
	Addr    string // client API host:port
	Node    *server.Node
	Lock    ticketv1connect.LockServiceClient
	Cluster ticketv1connect.ClusterServiceClient
	Config  config.Config

	// Options are this node's server options at each (re)start, after
	// the Cluster's own (a later one wins).
	Options []server.Option

	serveErr chan error
}

// Cluster is a set of in-process nodes.
type Cluster struct {
	Nodes []*Instance
	// HTTP is the h2c client the Lock and Cluster clients use.
	HTTP *http.Client

	t   testing.TB
	o   options
	mu  sync.Mutex
	log *zap.Logger
	// reserved holds the raft address of each node left out by WithLater
	// until its start, so no connection takes it as its local port.
	reserved map[int]net.Listener
}

// H2CClient returns an HTTP client that speaks HTTP/2 without TLS (prior
// knowledge) to http:// URLs, as gRPC clients do.
func H2CClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}

// Start starts n nodes bootstrapped as one cluster (n = 1: a lone node) and
// waits until one of them leads. The cluster is closed by t.Cleanup.
func Start(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	o := options{backend: config.BackendHashicorp}
	for _, opt := range opts {
		opt(&o)
	}
	c := &Cluster{t: t, o: o, HTTP: H2CClient(), log: zap.NewNop()}
	if o.logs {
		c.log = zaptest.NewLogger(t, zaptest.Level(zap.DebugLevel))
	}
	dir := t.TempDir()
	var peers []config.Peer
	lns := make([]net.Listener, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("nodetest: listen: %v", err)
		}
		lns[i] = ln
	}
	// The Raft ports are bound later by each backend: pick them below the
	// ephemeral range (ticketdtest.FreeAddrs), where no outgoing connection can
	// take one in between.
	raftAddrs := ticketdtest.FreeAddrs(t, n)
	for i := range n {
		peers = append(peers, config.Peer{ID: fmt.Sprintf("n%d", i+1), RaftAddr: raftAddrs[i], APIAddr: lns[i].Addr().String()})
	}
	for i := range n {
		cfg := config.DefaultConfig()
		cfg.ID = peers[i].ID
		cfg.APIAddr = peers[i].APIAddr
		cfg.RaftAddr = peers[i].RaftAddr
		cfg.DataDir = filepath.Join(dir, cfg.ID)
		cfg.Backend = o.backend
		cfg.Lease.MinMS = 10
		if n > 1 {
			cfg.Bootstrap = peers
		}
		if o.editCfg != nil {
			o.editCfg(i, &cfg)
		}
		in := &Instance{ID: cfg.ID, Addr: cfg.APIAddr, Config: cfg}
		if o.opts != nil {
			in.Options = o.opts(i)
		}
		c.Nodes = append(c.Nodes, in)
		if o.prepare != nil {
			if err := o.prepare(i, cfg); err != nil {
				for _, l := range lns[i:] {
					_ = l.Close()
				}
				t.Fatalf("nodetest: prepare %s: %v", cfg.ID, err)
			}
		}
		if o.later[i] {
			_ = lns[i].Close()
			if c.reserved == nil {
				c.reserved = map[int]net.Listener{}
			}
			if ln, err := net.Listen("tcp", cfg.RaftAddr); err == nil {
				c.reserved[i] = ln
			}
			continue
		}
		if err := c.start(in, lns[i]); err != nil {
			for _, l := range lns[i:] {
				_ = l.Close()
			}
			t.Fatalf("nodetest: start %s: %v", cfg.ID, err)
		}
	}
	t.Cleanup(c.Close)
	c.WaitLeader(t)
	return c
}

func (c *Cluster) start(in *Instance, ln net.Listener) error {
	opts := append([]server.Option{server.WithLogger(c.log), server.WithBootstrapProbeWait(bootstrapProbeWait)}, in.Options...)
	node, err := server.New(in.Config, opts...)
	if err != nil {
		_ = ln.Close()
		return err
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- node.Serve(ln) }()
	c.mu.Lock()
	defer c.mu.Unlock()
	in.Node = node
	in.serveErr = serveErr
	in.Lock = ticketv1connect.NewLockServiceClient(c.HTTP, "http://"+in.Addr, c.o.client...)
	in.Cluster = ticketv1connect.NewClusterServiceClient(c.HTTP, "http://"+in.Addr, c.o.client...)
	return nil
}

// Join starts one more node that joins the cluster through node via's API
// (config join) and returns its index; WithServerOptions gives its options
// for that index. It does not wait for the join.
func (c *Cluster) Join(t testing.TB, via int) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("nodetest: listen: %v", err)
	}
	tmpl := c.Nodes[0].Config
	cfg := tmpl
	cfg.ID = fmt.Sprintf("n%d", len(c.Nodes)+1)
	cfg.APIAddr = ln.Addr().String()
	cfg.RaftAddr = ticketdtest.FreeAddr(t)
	cfg.DataDir = filepath.Join(filepath.Dir(tmpl.DataDir), cfg.ID)
	cfg.Bootstrap = nil
	cfg.Join = c.Nodes[via].Addr
	in := &Instance{ID: cfg.ID, Addr: cfg.APIAddr, Config: cfg}
	c.mu.Lock()
	c.Nodes = append(c.Nodes, in)
	i := len(c.Nodes) - 1
	c.mu.Unlock()
	if c.o.opts != nil {
		in.Options = c.o.opts(i)
	}
	if err := c.start(in, ln); err != nil {
		t.Fatalf("nodetest: start %s: %v", cfg.ID, err)
	}
	return i
}

// Stop closes node i (graceful: as on SIGTERM). Its data stays.
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	in := c.Nodes[i]
	node := in.Node
	in.Node = nil
	c.mu.Unlock()
	if node == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := node.Close(ctx); err != nil {
		c.t.Logf("nodetest: close %s: %v", in.ID, err)
	}
	if err := <-in.serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		c.t.Logf("nodetest: serve %s: %v", in.ID, err)
	}
}

// Restart starts the stopped node i again on its addresses and data.
func (c *Cluster) Restart(t testing.TB, i int) {
	t.Helper()
	if err := c.TryRestart(i); err != nil {
		t.Fatalf("nodetest: %v", err)
	}
}

// TryRestart is Restart returning server.New's error (the node stays stopped).
func (c *Cluster) TryRestart(i int) error {
	in := c.Nodes[i]
	c.mu.Lock()
	if ln, ok := c.reserved[i]; ok {
		_ = ln.Close()
		delete(c.reserved, i)
	}
	c.mu.Unlock()
	var ln net.Listener
	var err error
	for range 50 { // the old socket may linger briefly
		if ln, err = net.Listen("tcp", in.Addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("relisten %s: %w", in.Addr, err)
	}
	if err := c.start(in, ln); err != nil {
		return fmt.Errorf("restart %s: %w", in.ID, err)
	}
	return nil
}

// Close stops every node.
func (c *Cluster) Close() {
	c.mu.Lock()
	for _, ln := range c.reserved {
		_ = ln.Close()
	}
	c.mu.Unlock()
	c.HTTP.CloseIdleConnections() // lets each server's Shutdown finish at once
	var wg sync.WaitGroup
	for i := range c.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); c.Stop(i) }()
	}
	wg.Wait()
	c.HTTP.CloseIdleConnections()
}

// Running returns the indexes of the nodes not stopped.
func (c *Cluster) Running() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i, in := range c.Nodes {
		if in.Node != nil {
			out = append(out, i)
		}
	}
	return out
}

// WaitLeader waits (up to 20s) until every running node reports the same
// leader, that leader is running and has recorded its API address, and
// returns the leader's index.
func (c *Cluster) WaitLeader(t testing.TB) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if i, ok := c.leader(); ok {
			return i
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nodetest: no leader agreed on within 20s")
	return -1
}

func (c *Cluster) leader() (int, bool) {
	leaderID := ""
	for _, i := range c.Running() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := c.Nodes[i].Cluster.Status(ctx, &ticketv1.StatusRequest{})
		cancel()
		if err != nil || st.GetLeaderId() == "" || st.GetLeaderAddr() == "" {
			return 0, false
		}
		if leaderID != "" && st.GetLeaderId() != leaderID {
			return 0, false
		}
		leaderID = st.GetLeaderId()
	}
	for _, i := range c.Running() {
		if c.Nodes[i].ID == leaderID {
			return i, c.addressRecorded(i, leaderID)
		}
	}
	return 0, false
}

// addressRecorded reports whether node i's replicated member directory
// holds the API address of member id (Status's leader_addr falls back to a
// leader's own configured address before its SetMember entry applies; the
// member list does not), so that a test starts after that entry.
func (c *Cluster) addressRecorded(i int, id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := c.Nodes[i].Cluster.Status(ctx, &ticketv1.StatusRequest{})
	if err != nil {
		return false
	}
	for _, m := range st.GetMembers() {
		if m.GetId() == id {
			return m.GetApiAddr() != ""
		}
	}
	return false
}

// Leader returns the leader's Instance (WaitLeader first).
func (c *Cluster) Leader(t testing.TB) *Instance {
	t.Helper()
	return c.Nodes[c.WaitLeader(t)]
}

// OnLeader calls fn with the current leader until it returns an error other
// than an Unavailable "not leader" (the node lost leadership before the
// call: nothing was proposed, and a client retries on the new leader),
// waiting at most 30 s; it returns fn's last error. A loaded machine can
// delay heartbeats past the election timeout between c.Leader and the call.
func (c *Cluster) OnLeader(t testing.TB, fn func(*Instance) error) error {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := fn(c.Leader(t))
		if err == nil || connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "not leader") || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Follower returns a running node that is not the leader.
func (c *Cluster) Follower(t testing.TB) *Instance {
	t.Helper()
	l := c.WaitLeader(t)
	for _, i := range c.Running() {
		if i != l {
			return c.Nodes[i]
		}
	}
	t.Fatal("nodetest: no follower")
	return nil
}
