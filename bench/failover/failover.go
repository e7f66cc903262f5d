package failover

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"

	"github.com/ticketd/ticketd/sdk"

	"github.com/ticketd/ticketd/bench/cputime"
	"github.com/ticketd/ticketd/bench/loopback"
	"github.com/ticketd/ticketd/bench/report"
)

// Sentinel errors of package failover.
var (
	// ErrBuild: the ticketd binary could not be built.
	ErrBuild = errors.New("failover: build ticketd")
	// ErrInvalidConfig: a Config field is missing.
	ErrInvalidConfig = errors.New("failover: invalid config")
	// ErrNoLeader: the cluster had no leader all nodes agree on in time.
	ErrNoLeader = errors.New("failover: no agreed leader")
	// ErrNoWrite: no write was acknowledged within Config.WriteTimeout of a kill.
	ErrNoWrite = errors.New("failover: no write acknowledged")
)

// Size is the number of nodes.
const Size = 3

// Config is one failover measurement.
type Config struct {
	// Binary is the ticketd binary (Build), Backend its --backend. Required.
	Binary, Backend string
	// Dir holds the nodes' data and logs; created, and removed by Run.
	// Required.
	Dir string
	// Kills is how many times the leader is killed; 0 means 5.
	Kills int
	// Args are extra `ticketd serve` flags for every node (such as
	// "--raft-election-timeout-ms=500"); none means the shipped defaults.
	Args []string
	// SDKOptions are given to the SDK client of the load and of the timed
	// writes (such as sdk.WithBackoff); none means the SDK's defaults.
	SDKOptions []sdk.Option
	// WriteTimeout bounds the wait for the first write after a kill; 0
	// means 30 s. SettleTimeout bounds the wait for the restarted node to
	// catch up (and the first leader); 0 means 60 s.
	WriteTimeout, SettleTimeout time.Duration
	// Logf, if set, receives a line per step (start, settle, kill, write).
	Logf func(format string, args ...any)
}

func (c Config) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
}

// Kill is one kill -9 of the leader.
type Kill struct {
	// Took is the time from the SIGKILL to the first acknowledged write.
	Took time.Duration
	// Err is why there is no figure (ErrNoWrite, ErrNoLeader, ...), else nil.
	Err error
}

// MS is Took in milliseconds.
func (k Kill) MS() float64 { return float64(k.Took) / float64(time.Millisecond) }

// Result is what Run measured.
type Result struct {
	// Kills holds one entry per kill, in order.
	Kills []Kill
	// CPU is the CPU time each ticketd process (all its incarnations) and
	// this process (the SDK clients) used over the run.
	CPU []report.CPUShare
}

// Run starts the cluster, kills its leader cfg.Kills times as the package
// doc says, and stops it. Errors: ErrInvalidConfig, start errors,
// ErrNoLeader when the cluster never settled (Result then holds the kills
// measured so far), ctx's error.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Binary == "" || cfg.Backend == "" || cfg.Dir == "" {
		return Result{}, fmt.Errorf("%w: Config needs Binary, Backend and Dir", ErrInvalidConfig)
	}
	if cfg.Kills == 0 {
		cfg.Kills = 5
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.SettleTimeout == 0 {
		cfg.SettleTimeout = 60 * time.Second
	}
	c, err := Start(cfg)
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(cfg.Dir)
	startWall, startCPU := time.Now(), cputime.Self()
	cfg.logf("started %d nodes", Size)
	res, err := c.run(ctx, cfg)
	cfg.logf("run done (%v); closing", err)
	c.Close()
	cfg.logf("closed")
	wall := time.Since(startWall)
	part := "failover/" + cfg.Backend
	self := cputime.Self() - startCPU
	res.CPU = append(res.CPU, report.CPUShare{Part: part, Process: "ticketbench (SDK clients)", CPUSec: self.Seconds(), WallSec: wall.Seconds(), Share: cputime.Share(self, wall)})
	for _, n := range c.nodes {
		res.CPU = append(res.CPU, report.CPUShare{Part: part, Process: "ticketd " + n.ID, CPUSec: n.cpu().Seconds(), WallSec: wall.Seconds(), Share: cputime.Share(n.cpu(), wall)})
	}
	return res, err
}

// Cluster is Size ticketd processes on loopback, bootstrapped together, and
// an SDK client of them: the failover measurement's cluster, which other
// measurements of real processes (bench/scale) build on. Its methods are
// for one goroutine, except Client, Nodes and HTTP.
type Cluster struct {
	bin    string
	nodes  []*Node
	hc     *http.Client
	status []ticketv1connect.ClusterServiceClient
	client *sdk.Client
}

// Start starts the Size processes of cfg.Binary with cfg.Backend and
// cfg.Args, their data and logs under cfg.Dir (created; left in place:
// the caller removes it), and an SDK client with cfg.SDKOptions. It does
// not wait for a leader (Settle does). Errors: a process that did not
// start, the SDK's; nothing is left running on error.
func Start(cfg Config) (*Cluster, error) {
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("failover: %w", err)
	}
	addrs, err := loopback.FreeAddrs(2 * Size)
	if err != nil {
		return nil, err
	}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	c := &Cluster{bin: cfg.Binary, hc: &http.Client{Transport: &http.Transport{Protocols: &p}, Timeout: 2 * time.Second}}
	var peers, endpoints []string
	for i := range Size {
		n := &Node{ID: fmt.Sprintf("n%d", i+1), APIAddr: addrs[2*i], RaftAddr: addrs[2*i+1]}
		n.DataDir = filepath.Join(cfg.Dir, n.ID)
		n.LogFile = filepath.Join(cfg.Dir, n.ID+".log")
		peers = append(peers, n.ID+"="+n.RaftAddr+"/"+n.APIAddr)
		endpoints = append(endpoints, n.APIAddr)
		c.nodes = append(c.nodes, n)
		c.status = append(c.status, ticketv1connect.NewClusterServiceClient(c.hc, "http://"+n.APIAddr))
	}
	for _, n := range c.nodes {
		n.args = append([]string{"serve", "--id", n.ID, "--api-addr", n.APIAddr, "--raft-addr", n.RaftAddr,
			"--data-dir", n.DataDir, "--backend", cfg.Backend, "--bootstrap", strings.Join(peers, ",")}, cfg.Args...)
		if err := n.start(c.bin); err != nil {
			c.Close()
			return nil, err
		}
	}
	if c.client, err = sdk.New(endpoints, cfg.SDKOptions...); err != nil {
		c.Close()
		return nil, fmt.Errorf("failover: sdk: %w", err)
	}
	return c, nil
}

// Nodes returns the cluster's processes, in id order (n1, n2, n3).
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Client returns the SDK client of every node (safe for concurrent use).
func (c *Cluster) Client() *sdk.Client { return c.client }

// HTTP returns the plaintext HTTP/2 client the cluster's Status calls use,
// for other plain requests to the nodes (/readyz).
func (c *Cluster) HTTP() *http.Client { return c.hc }

// Kill sends SIGKILL to node i and waits for its exit (kill -9).
func (c *Cluster) Kill(i int) { c.nodes[i].stop(syscall.SIGKILL, 10*time.Second) }

// Restart starts node i again on its data dir, its output appended to its
// log file. Errors: the process did not start.
func (c *Cluster) Restart(i int) error { return c.nodes[i].start(c.bin) }

// Close stops every process (SIGTERM, then SIGKILL after 10 s) and the client.
func (c *Cluster) Close() {
	if c.client != nil {
		c.client.Close()
	}
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(func() { n.stop(syscall.SIGTERM, 10*time.Second) })
	}
	wg.Wait()
	c.hc.CloseIdleConnections()
}

// run is the kill loop.
func (c *Cluster) run(ctx context.Context, cfg Config) (Result, error) {
	var res Result
	// A light write load: one SDK client writing about 20 times a second.
	loadCtx, stopLoad := context.WithCancel(ctx)
	var loadDone sync.WaitGroup
	loadDone.Go(func() { c.lightLoad(loadCtx) })
	defer func() {
		stopLoad()
		loadDone.Wait()
	}()

	for k := 1; k <= cfg.Kills; k++ {
		t0 := time.Now()
		leader, err := c.Settle(ctx, cfg.SettleTimeout)
		if err != nil {
			return res, err
		}
		cfg.logf("kill %d: settled in %v, leader %s", k, time.Since(t0), c.nodes[leader].ID)
		killed := time.Now()
		c.Kill(leader)
		took, err := c.FirstWrite(ctx, fmt.Sprintf("failover/%s/kill%d", cfg.Backend, k), killed, cfg.WriteTimeout)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		res.Kills = append(res.Kills, Kill{Took: took, Err: err})
		cfg.logf("kill %d: first write after %v (err %v)", k, took, err)
		if err := c.Restart(leader); err != nil {
			return res, err
		}
	}
	_, err := c.Settle(ctx, cfg.SettleTimeout)
	return res, err
}

// lightLoad acquires and releases a key through the SDK every 50 ms until
// ctx ends; failures (during a failover) are expected and ignored.
func (c *Cluster) lightLoad(ctx context.Context) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if g, err := c.client.Acquire(wctx, fmt.Sprintf("failover/load/%d", i%16), 10*time.Second); err == nil {
			_ = c.client.Release(wctx, g.Key, g.Token)
		}
		cancel()
	}
}

// FirstWrite sends one SDK Acquire of key (the SDK retries and finds the
// new leader), releases it, and returns the time from killed to the
// Acquire's acknowledgement. Errors: ErrNoWrite after timeout.
func (c *Cluster) FirstWrite(ctx context.Context, key string, killed time.Time, timeout time.Duration) (time.Duration, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	g, err := c.client.Acquire(wctx, key, 10*time.Second)
	took := time.Since(killed)
	if err != nil {
		return 0, fmt.Errorf("%w within %v: %v", ErrNoWrite, timeout, err)
	}
	_ = c.client.Release(wctx, g.Key, g.Token)
	return took, nil
}

// Settle waits until every node runs, all agree on one leader, and every
// node has applied the leader's commit index and is not replaying; it
// returns the leader's index in Nodes. Errors: ErrNoLeader after timeout,
// ctx's error.
func (c *Cluster) Settle(ctx context.Context, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if leader, ok, why := c.agreed(ctx); ok {
			return leader, nil
		} else {
			last = why
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("%w within %v (%s)", ErrNoLeader, timeout, last)
}

// agreed reads every node's Status once.
func (c *Cluster) agreed(ctx context.Context) (leader int, ok bool, why string) {
	sts := make([]*ticketv1.StatusResponse, len(c.nodes))
	for i, sc := range c.status {
		st, err := sc.Status(ctx, &ticketv1.StatusRequest{})
		if err != nil {
			return 0, false, fmt.Sprintf("%s: %v", c.nodes[i].ID, err)
		}
		sts[i] = st
	}
	leader = -1
	for i, st := range sts {
		if st.GetLeaderId() == "" || st.GetLeaderId() != sts[0].GetLeaderId() {
			return 0, false, "no agreed leader"
		}
		if st.GetLeaderId() == st.GetNodeId() {
			leader = i
		}
	}
	if leader < 0 {
		return 0, false, "leader not among the nodes"
	}
	for _, st := range sts {
		if st.GetAppliedIndex() < sts[leader].GetCommitIndex() || st.GetReplaying() {
			return 0, false, st.GetNodeId() + " catching up"
		}
	}
	return leader, true, ""
}
