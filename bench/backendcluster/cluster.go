package backendcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/bench/loopback"
	"github.com/ticketd/ticketd/core"
)

// Sentinel errors of package backendcluster.
var (
	// ErrNoLeader: no node became leader within Config.StartTimeout.
	ErrNoLeader = errors.New("backendcluster: no leader elected")
	// ErrInvalidConfig: Config.New or Config.Dir is missing.
	ErrInvalidConfig = errors.New("backendcluster: invalid config")
)

// Size is the number of nodes: three, the smallest cluster that survives a failure.
const Size = 3

// NewFunc makes one node from its config, as hashicorp.New and etcd.New do.
type NewFunc func(cfg backends.Config) (core.Consensus, error)

// NewFuncOf adapts a backend constructor that returns its concrete node type
// (hashicorp.New, etcd.New) to a NewFunc. On error the NewFunc returns a nil
// core.Consensus, never a typed nil pointer inside a non-nil interface.
func NewFuncOf[N core.Consensus](newNode func(backends.Config) (N, error)) NewFunc {
	return func(cfg backends.Config) (core.Consensus, error) {
		n, err := newNode(cfg)
		if err != nil {
			return nil, err
		}
		return n, nil
	}
}

// Config says what cluster to start.
type Config struct {
	// New makes each node. Required.
	New NewFunc
	// Dir is created if missing; each node keeps its data in Dir/<node id>.
	// Close removes Dir. Required.
	Dir string
	// StartTimeout bounds the wait for the first leader; 0 means 30 s.
	StartTimeout time.Duration
	// Tune, if set, adjusts each node's Config before New (timeouts, logger).
	Tune func(*backends.Config)
}

// Cluster is Size nodes started by Start. Leader and Nodes are safe for
// concurrent use; Close is called once, after the last Propose.
type Cluster struct {
	dir   string
	nodes []core.Consensus

	mu     sync.Mutex
	leader int // index into nodes, -1 when none
	ch     chan struct{}
}

// Start starts Size nodes on free loopback ports, bootstrapped as one cluster,
// and returns once one of them leads. Errors: ErrInvalidConfig, the
// backend's New error, ErrNoLeader, ctx.Err(), file-system errors; on error
// every started node is closed.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.New == nil || cfg.Dir == "" {
		return nil, fmt.Errorf("%w: Config needs New and Dir", ErrInvalidConfig)
	}
	timeout := cfg.StartTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("backendcluster: %w", err)
	}
	addrs, err := loopback.FreeAddrs(Size)
	if err != nil {
		return nil, err
	}
	members := make([]core.Member, Size)
	for i := range members {
		members[i] = core.Member{ID: fmt.Sprintf("n%d", i+1), RaftAddr: addrs[i], Voter: true}
	}
	c := &Cluster{dir: cfg.Dir, leader: -1, ch: make(chan struct{}, 1)}
	for i, m := range members {
		nc := backends.DefaultConfig()
		nc.ID, nc.RaftAddr = m.ID, m.RaftAddr
		nc.DataDir = filepath.Join(cfg.Dir, m.ID)
		nc.Bootstrap = members
		nc.StateMachine = core.NewStateMachine()
		nc.OnLeaderChange = func(ev core.LeaderEvent) { c.observe(i, ev) }
		if cfg.Tune != nil {
			cfg.Tune(&nc)
		}
		node, err := cfg.New(nc)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("backendcluster: start %s: %w", m.ID, err)
		}
		c.mu.Lock()
		c.nodes = append(c.nodes, node)
		c.mu.Unlock()
	}
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for c.Leader() == nil {
		select {
		case <-c.ch:
		case <-wait.Done():
			c.Close()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%w within %v", ErrNoLeader, timeout)
		}
	}
	return c, nil
}

// observe records node i's view of a leadership change.
func (c *Cluster) observe(i int, ev core.LeaderEvent) {
	c.mu.Lock()
	switch {
	case ev.IsLeader:
		c.leader = i
	case c.leader == i:
		c.leader = -1
	}
	c.mu.Unlock()
	select {
	case c.ch <- struct{}{}:
	default:
	}
}

// Leader returns the node that last reported itself leader, or nil when the
// leader stepped down and no successor has reported yet.
func (c *Cluster) Leader() core.Consensus {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader < 0 || c.leader >= len(c.nodes) {
		return nil
	}
	return c.nodes[c.leader]
}

// Nodes returns every node, in start order.
func (c *Cluster) Nodes() []core.Consensus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]core.Consensus(nil), c.nodes...)
}

// Close stops every node and removes the data directory; it returns the
// first error.
func (c *Cluster) Close() error {
	var first error
	for _, n := range c.Nodes() {
		if err := n.Close(); err != nil && first == nil {
			first = err
		}
	}
	if err := os.RemoveAll(c.dir); err != nil && first == nil {
		first = err
	}
	return first
}
