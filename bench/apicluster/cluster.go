package apicluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"

	"github.com/ticketd/ticketd/bench/loopback"
)

// Sentinel errors of package apicluster.
var (
	// ErrNoLeader: no node served as leader within Config.StartTimeout.
	ErrNoLeader = errors.New("apicluster: no leader serving")
	// ErrInvalidConfig: Config.Backend or Config.Dir is empty.
	ErrInvalidConfig = errors.New("apicluster: invalid config")
)

// Size is the number of nodes.
const Size = 3

// ProfileLabel is the pprof label whose value is the node id ("n1", "n2",
// "n3") on every goroutine of that node.
const ProfileLabel = "ticketd_node"

// Config says what cluster to start.
type Config struct {
	// Backend is config.BackendHashicorp or config.BackendEtcd. Required.
	Backend string
	// Dir is created if missing; node data goes to Dir/<node id>; Close
	// removes Dir. Required.
	Dir string
	// StartTimeout bounds the wait for a serving leader; 0 means 30 s.
	StartTimeout time.Duration
	// Options are passed to every server.New (e.g. server.WithLogger).
	Options []server.Option
	// Tune, if set, adjusts each node's config.Config before server.New
	// (Raft timing, snapshot threshold).
	Tune func(*config.Config)
}

// Cluster is Size ticketd nodes started by Start. Its methods are safe for
// concurrent use, except Close, which must be called once, after the last
// use of Client.
type Cluster struct {
	dir    string
	nodes  []*server.Node
	served sync.WaitGroup
	hc     *http.Client
	leader string // base URL of the leader found by Start
	peers  []config.Peer
	client ticketv1connect.LockServiceClient
}

// Start starts Size nodes bootstrapped as one cluster and returns once one of
// them leads and has served an Acquire and a Release. Errors:
// ErrInvalidConfig, server.New's, listen and file-system errors, ErrNoLeader,
// ctx.Err(); on error every started node is closed.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Backend == "" || cfg.Dir == "" {
		return nil, fmt.Errorf("%w: Config needs Backend and Dir", ErrInvalidConfig)
	}
	timeout := cfg.StartTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("apicluster: %w", err)
	}
	c := &Cluster{dir: cfg.Dir, hc: HTTPClient()}

	// API listeners stay open and are handed to Serve; Raft ports are
	// reserved and released for the backends to bind.
	apiLns := make([]net.Listener, 0, Size)
	closeLns := func() {
		for _, ln := range apiLns {
			ln.Close()
		}
	}
	raftAddrs, err := loopback.FreeAddrs(Size)
	if err != nil {
		return nil, err
	}
	peers := make([]config.Peer, Size)
	for i := range Size {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			closeLns()
			return nil, fmt.Errorf("apicluster: listen: %w", err)
		}
		apiLns = append(apiLns, ln)
		peers[i] = config.Peer{ID: fmt.Sprintf("n%d", i+1), RaftAddr: raftAddrs[i], APIAddr: ln.Addr().String()}
	}
	for i, p := range peers {
		nc := config.DefaultConfig()
		nc.ID, nc.APIAddr, nc.RaftAddr = p.ID, p.APIAddr, p.RaftAddr
		nc.DataDir = filepath.Join(cfg.Dir, p.ID)
		nc.Backend = cfg.Backend
		nc.Bootstrap = peers
		nc.Log.Level = "error"
		if cfg.Tune != nil {
			cfg.Tune(&nc)
		}
		// Every goroutine the node starts, now (Raft, storage) or later
		// (connections, handlers), carries the profiler label
		// ProfileLabel=<node id>, so a CPU profile of this process can be
		// split by node (go tool pprof -tags, -tagfocus).
		var node *server.Node
		pprof.Do(ctx, pprof.Labels(ProfileLabel, p.ID), func(context.Context) {
			// A new cluster in new dirs, its nodes started one after
			// another: nothing to ask before bootstrapping.
			opts := append([]server.Option{server.WithBootstrapProbeWait(0)}, cfg.Options...)
			node, err = server.New(nc, opts...)
		})
		if err != nil {
			for _, ln := range apiLns[i:] {
				ln.Close()
			}
			c.Close()
			return nil, fmt.Errorf("apicluster: start %s: %w", p.ID, err)
		}
		c.nodes = append(c.nodes, node)
		c.served.Go(func() {
			pprof.Do(context.Background(), pprof.Labels(ProfileLabel, p.ID), func(context.Context) { _ = node.Serve(apiLns[i]) })
		})
	}

	c.peers = peers
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.awaitLeader(wait, peers); err != nil {
		c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return c, nil
}

// awaitLeader polls every node's Status until one says it is the leader and
// then checks that it serves a lock cycle.
func (c *Cluster) awaitLeader(ctx context.Context, peers []config.Peer) error {
	var last error
	for {
		for _, p := range peers {
			url := "http://" + p.APIAddr
			st, err := ticketv1connect.NewClusterServiceClient(c.hc, url).Status(ctx, &ticketv1.StatusRequest{})
			if err != nil {
				last = err
				continue
			}
			if st.GetLeaderId() == "" || st.GetLeaderId() != st.GetNodeId() {
				continue
			}
			client := ticketv1connect.NewLockServiceClient(c.hc, url)
			if err := probe(ctx, client); err != nil {
				last = err
				continue
			}
			c.leader, c.client = url, client
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ErrNoLeader, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// probe runs one Acquire+Release cycle.
func probe(ctx context.Context, client ticketv1connect.LockServiceClient) error {
	acq, err := client.Acquire(ctx, &ticketv1.AcquireRequest{Key: "apicluster/probe", LeaseMs: 10_000, Owner: "apicluster-probe"})
	if err != nil {
		return err
	}
	_, err = client.Release(ctx, &ticketv1.ReleaseRequest{Key: "apicluster/probe", Token: acq.GetToken()})
	return err
}

// Client returns a LockService client of the leader Start found.
func (c *Cluster) Client() ticketv1connect.LockServiceClient { return c.client }

// LeaderURL returns the leader's API base URL ("http://127.0.0.1:port").
func (c *Cluster) LeaderURL() string { return c.leader }

// CurrentLeaderURL returns the API base URL of the node that leads now, by
// the Status of the nodes in turn (the first that names a leader it knows):
// after an election, clients sent there need no forwarding hop. Errors: the
// last Status error, or ErrNoLeader when no node names a leader.
func (c *Cluster) CurrentLeaderURL(ctx context.Context) (string, error) {
	last := ErrNoLeader
	for _, p := range c.peers {
		st, err := ticketv1connect.NewClusterServiceClient(c.hc, "http://"+p.APIAddr).Status(ctx, &ticketv1.StatusRequest{})
		if err != nil {
			last = err
			continue
		}
		for _, q := range c.peers {
			if q.ID == st.GetLeaderId() {
				return "http://" + q.APIAddr, nil
			}
		}
	}
	return "", last
}

// Close stops every node at once (each with up to 10 s to finish in-flight
// requests), removes the data directory and returns the first error.
func (c *Cluster) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() { errs[i] = n.Close(ctx) })
	}
	wg.Wait()
	c.served.Wait()
	c.hc.CloseIdleConnections()
	errs = append(errs, os.RemoveAll(c.dir))
	return errors.Join(errs...)
}

// HTTPClient returns the HTTP client the Go SDK speaks to a cluster with
// (sdk.NewHTTPClient): HTTP/2 without TLS (prior knowledge) to the
// cluster's API, as ticketd serves it on loopback, one connection per
// node, every call a stream on it, a request's HEADERS frame written with
// its DATA frame (package sdk/h2hold), so that the bench measures what the
// SDK's users get. For clients in another process, with LeaderURL.
func HTTPClient() *http.Client { return sdk.NewHTTPClient() }

// Term returns the Raft term the leader Start found reports through Status
// (a follower's term once it no longer leads): with pre-vote on, the term
// grows only by a real election, so the difference of two reads counts
// elections. Errors: the Status call's.
func (c *Cluster) Term(ctx context.Context) (uint64, error) {
	st, err := ticketv1connect.NewClusterServiceClient(c.hc, c.leader).Status(ctx, &ticketv1.StatusRequest{})
	if err != nil {
		return 0, err
	}
	return st.GetTerm(), nil
}
