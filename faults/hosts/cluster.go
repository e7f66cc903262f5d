//go:build linux

package hosts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/sdk/ticketdtest/procstop"
)

// Ports every node listens on, on its own host address.
const (
	APIPort  = 7001
	RaftPort = 7101
)

// Config configures Start.
type Config struct {
	// Backend is the consensus backend ("hashicorp", "etcd"); default "hashicorp".
	Backend string
	// Nodes is the number of voters bootstrapped together; default 3.
	Nodes int
	// ElectionTimeout is the nodes' election timeout; default 500ms
	// (heartbeat: a fifth of it).
	ElectionTimeout time.Duration
	// Args are extra `ticketd serve` flags for every node.
	Args []string
	// Bin is the ticketd binary; default ticketdtest.Binary (TICKETD_BIN or
	// built once per process).
	Bin string
	// StartTimeout bounds the wait for the first agreed leader; default 60s.
	StartTimeout time.Duration
	// TLS runs the cluster with the production security flags: TLS on the
	// client API with client certificates required (--cert-file,
	// --key-file, --trusted-ca-file, --client-cert-auth) and mutual TLS
	// between peers (--peer-cert-file, --peer-key-file,
	// --peer-trusted-ca-file), every certificate made in the test
	// (crypto/x509) for the node's current address. Without it the nodes
	// run plaintext, with --insecure when the binary knows the flag.
	TLS bool
}

func (c Config) withDefaults(t testing.TB) Config {
	if c.Backend == "" {
		c.Backend = "hashicorp"
	}
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = 500 * time.Millisecond
	}
	if c.Bin == "" {
		c.Bin = ticketdtest.Binary(t)
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = time.Minute
	}
	return c
}

// Node is one ticketd process on its own Host. Its ID never changes; its
// addresses change only through Cluster.Move.
type Node struct {
	// ID is the node id (n1, n2, ...).
	ID string
	// Host is the namespace the node runs in.
	Host *Host
	// DataDir is the node's data directory; LogFile gets its stdout and
	// stderr, appended across restarts.
	DataDir string
	LogFile string

	mu     sync.Mutex
	args   []string
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
	exit   exitState // exits.go
}

// APIAddr returns the node's client API host:port on its current address.
func (n *Node) APIAddr() string { return net.JoinHostPort(n.Host.Addr(), fmt.Sprint(APIPort)) }

// RaftAddr returns the node's peer host:port on its current address.
func (n *Node) RaftAddr() string { return net.JoinHostPort(n.Host.Addr(), fmt.Sprint(RaftPort)) }

// Running reports whether the node's process is alive (possibly paused).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && !isClosed(n.exited)
}

// process returns the node's process (ticketd's own: `ip netns exec` execs
// it in place), or nil when it is not running.
func (n *Node) process() *os.Process {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || isClosed(n.exited) {
		return nil
	}
	return n.cmd.Process
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Cluster is a set of ticketd nodes, each on its own Host of one Network.
// Its methods are safe for concurrent use; node indexes are stable (a
// removed node keeps its index).
type Cluster struct {
	t        testing.TB
	cfg      Config
	net      *Network
	dir      string
	http     *http.Client
	insecure bool
	ca       *certAuthority // nil: plaintext

	mu    sync.Mutex
	nodes []*Node
}

// Start creates a Network with cfg.Nodes hosts, starts a ticketd on each,
// bootstrapped together, and waits for an agreed leader. It fails t on
// error (call Skip first to skip where namespaces are unavailable) and
// registers the teardown of processes and namespaces with t.Cleanup.
func Start(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	cfg = cfg.withDefaults(t)
	nw, err := NewNetwork()
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, cfg: cfg, net: nw, dir: t.TempDir(), insecure: knowsFlag(cfg.Bin, "--insecure")}
	if cfg.TLS {
		if !knowsFlag(cfg.Bin, "--peer-cert-file") {
			_ = nw.Close()
			t.Skipf("hosts: %s has no TLS flags yet", cfg.Bin)
		}
		if c.ca, err = newCA(c.dir); err != nil {
			_ = nw.Close()
			t.Fatal(err)
		}
	}
	if c.http, err = c.newHTTPClient(); err != nil {
		_ = nw.Close()
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var peers []string
	for range cfg.Nodes {
		n, err := c.newNode()
		if err != nil {
			t.Fatal(err)
		}
		peers = append(peers, n.ID+"="+n.RaftAddr()+"/"+n.APIAddr())
	}
	for i, n := range c.nodes {
		n.args = []string{"--bootstrap", strings.Join(peers, ",")}
		if err := c.start(i); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitLeader(t, cfg.StartTimeout)
	return c
}

// knowsFlag reports whether `bin serve --help` lists flag.
func knowsFlag(bin, flag string) bool {
	out, _ := exec.Command(bin, "serve", "--help").CombinedOutput()
	return bytes.Contains(out, []byte(flag+" "))
}

// newHTTPClient returns an HTTP/2 client whose connections start in the
// client namespace: h2c, or TLS with a client certificate in TLS mode.
func (c *Cluster) newHTTPClient() (*http.Client, error) {
	var p http.Protocols
	if c.ca == nil {
		p.SetUnencryptedHTTP2(true)
		return &http.Client{Transport: &http.Transport{Protocols: &p, DialContext: c.net.DialContext}}, nil
	}
	cfg, err := c.ca.clientConfig()
	if err != nil {
		return nil, err
	}
	p.SetHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p, DialContext: c.net.DialContext, TLSClientConfig: cfg}}, nil
}

// scheme is the URL scheme of the nodes' API.
func (c *Cluster) scheme() string {
	if c.ca != nil {
		return "https://"
	}
	return "http://"
}

// newNode creates a host and a node record on it (not started).
func (c *Cluster) newNode() (*Node, error) {
	h, err := c.net.AddHost()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := fmt.Sprintf("n%d", len(c.nodes)+1)
	n := &Node{ID: id, Host: h, DataDir: filepath.Join(c.dir, id), LogFile: filepath.Join(c.dir, id+".log")}
	c.nodes = append(c.nodes, n)
	return n, nil
}

// serveArgs are the production flags of node n on its current address
// (in TLS mode, with a certificate issued for it).
func (c *Cluster) serveArgs(n *Node) ([]string, error) {
	et := c.cfg.ElectionTimeout.Milliseconds()
	args := []string{"serve",
		"--id", n.ID,
		"--api-addr", n.APIAddr(),
		"--raft-addr", n.RaftAddr(),
		"--data-dir", n.DataDir,
		"--backend", c.cfg.Backend,
		fmt.Sprintf("--raft-election-timeout-ms=%d", et),
		fmt.Sprintf("--raft-heartbeat-ms=%d", max(et/5, 10)),
		"--raft-snapshot-threshold=512",
	}
	switch {
	case c.ca != nil:
		cert, key, err := c.ca.issue(n.ID, net.ParseIP(n.Host.Addr()))
		if err != nil {
			return nil, err
		}
		args = append(args, "--cert-file", cert, "--key-file", key, "--trusted-ca-file", c.ca.caFile, "--client-cert-auth",
			"--peer-cert-file", cert, "--peer-key-file", key, "--peer-trusted-ca-file", c.ca.caFile)
	case c.insecure:
		// Plaintext on a non-loopback address must be asked for.
		args = append(args, "--insecure")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return append(append(args, c.cfg.Args...), n.args...), nil
}

// start launches node i's process inside its host's namespace.
func (c *Cluster) start(i int) error {
	n := c.Node(i)
	args, err := c.serveArgs(n)
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(n.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// `ip netns exec` execs the binary in place: the pid is ticketd's own,
	// so kill -9 and SIGSTOP reach it directly.
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.Host.Name, c.cfg.Bin}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("hosts: start %s: %w", n.ID, err)
	}
	exited := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.exited, n.paused, n.exit.killing = cmd, exited, false, false
	n.mu.Unlock()
	go n.watchExit(cmd, logf, exited)
	return nil
}

// Net returns the cluster's Network, for link faults.
func (c *Cluster) Net() *Network { return c.net }

// Len returns the number of nodes ever started (removed ones included).
func (c *Cluster) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.nodes)
}

// Node returns node i.
func (c *Cluster) Node(i int) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// Hosts returns every node's Host, in node order.
func (c *Cluster) Hosts() []*Host {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Host, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Host
	}
	return out
}

// Lock returns a LockService client of node i at its current address.
func (c *Cluster) Lock(i int) ticketv1connect.LockServiceClient {
	return ticketv1connect.NewLockServiceClient(c.http, c.scheme()+c.Node(i).APIAddr())
}

// Cluster returns a ClusterService client of node i at its current address.
func (c *Cluster) Cluster(i int) ticketv1connect.ClusterServiceClient {
	return ticketv1connect.NewClusterServiceClient(c.http, c.scheme()+c.Node(i).APIAddr())
}

// Status asks node i for its status, giving up after a second.
func (c *Cluster) Status(ctx context.Context, i int) (*ticketv1.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return c.Cluster(i).Status(ctx, &ticketv1.StatusRequest{})
}

// Running returns the indexes of nodes whose process is alive and not paused.
func (c *Cluster) Running() []int {
	var out []int
	for i := range c.Len() {
		n := c.Node(i)
		n.mu.Lock()
		paused := n.paused
		n.mu.Unlock()
		if n.Running() && !paused {
			out = append(out, i)
		}
	}
	return out
}

// index returns the index of the node with id (-1 if none).
func (c *Cluster) index(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, n := range c.nodes {
		if n.ID == id {
			return i
		}
	}
	return -1
}

// AgreedLeader waits until the nodes in among (all running ones if nil)
// name the same leader and it is one of them, or ctx ends (ErrNoLeader wrapping
// ctx's error).
func (c *Cluster) AgreedLeader(ctx context.Context, among []int) (int, error) {
	for {
		nodes := among
		if nodes == nil {
			nodes = c.Running()
		}
		leader, agreed := "", len(nodes) > 0
		for _, i := range nodes {
			st, err := c.Status(ctx, i)
			if err != nil || st.GetLeaderId() == "" || (leader != "" && st.GetLeaderId() != leader) {
				agreed = false
				break
			}
			leader = st.GetLeaderId()
		}
		if l := c.index(leader); agreed && slices.Contains(nodes, l) {
			return l, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitLeader is AgreedLeader over the running nodes, bounded by timeout;
// it fails t when none is agreed on in time.
func (c *Cluster) WaitLeader(t testing.TB, timeout time.Duration) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	l, err := c.AgreedLeader(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Leader returns the running node that reports itself leader with the
// highest term (a deposed leader cut off from the others may still think
// it leads, in an older term), polling until there is one or ctx ends.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	for {
		best, term := -1, uint64(0)
		for _, i := range c.Running() {
			st, err := c.Status(ctx, i)
			if err == nil && st.GetLeaderId() == st.GetNodeId() && st.GetTerm() >= term {
				best, term = i, st.GetTerm()
			}
		}
		if best >= 0 {
			return best, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// signal sends sig to node i's process if it runs.
func (c *Cluster) signal(i int, sig syscall.Signal) {
	n := c.Node(i)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && !isClosed(n.exited) {
		if sig == syscall.SIGKILL {
			n.expectKill()
		}
		_ = n.cmd.Process.Signal(sig)
	}
}

// wait blocks until node i's process has exited or d passes.
func (c *Cluster) wait(i int, d time.Duration) bool {
	n := c.Node(i)
	n.mu.Lock()
	exited := n.exited
	n.mu.Unlock()
	if exited == nil {
		return true
	}
	select {
	case <-exited:
		return true
	case <-time.After(d):
		return false
	}
}

// Kill sends SIGKILL to node i (kill -9) and waits for it to exit.
func (c *Cluster) Kill(i int) error {
	c.signal(i, syscall.SIGKILL)
	if !c.wait(i, time.Minute) {
		return fmt.Errorf("hosts: %s did not exit after SIGKILL", c.Node(i).ID)
	}
	return nil
}

// Restart starts node i again (same id, address and data) after Kill; a
// running node is killed first.
func (c *Cluster) Restart(i int) error {
	if c.Node(i).Running() {
		if err := c.Kill(i); err != nil {
			return err
		}
	}
	return c.start(i)
}

// Pause stops node i with SIGSTOP and returns once every thread of it has
// stopped (procstop.Stop: until then its network reader and log sync may
// still receive, sync and acknowledge); Resume continues it (SIGCONT). On
// error the node runs on.
func (c *Cluster) Pause(i int) error {
	n := c.Node(i)
	if p := n.process(); p != nil {
		if err := procstop.Stop(p); err != nil {
			return fmt.Errorf("hosts: pause %s: %w", n.ID, err)
		}
	}
	n.mu.Lock()
	n.paused = true
	n.mu.Unlock()
	return nil
}

// Resume continues node i after Pause.
func (c *Cluster) Resume(i int) error {
	c.signal(i, syscall.SIGCONT)
	n := c.Node(i)
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
	return nil
}

// leaderCall runs fn against the current leader (found with Leader),
// retrying until fn succeeds, fails for good (final), or ctx ends:
// leadership may move meanwhile.
func (c *Cluster) leaderCall(ctx context.Context, fn func(ctx context.Context, l int) error) error {
	var last error
	for {
		l, err := c.Leader(ctx)
		if err != nil {
			return errors.Join(last, err)
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		last = fn(cctx, l)
		cancel()
		if last == nil || final(last) {
			return last
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// final reports whether err is an answer that a retry would not change
// (bad input, or a member that is already there or already gone: a retry
// of a change that committed says so). FailedPrecondition is not final: a
// node is refused until its new API address answers, which it soon does.
func final(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeAlreadyExists, connect.CodeNotFound:
		return true
	}
	return false
}

// AddNode creates a new host and starts a fresh node on it with --join
// through a running member, and waits (bounded by ctx) until the leader
// lists it as a member. It returns the new node's index.
func (c *Cluster) AddNode(ctx context.Context) (int, error) {
	run := c.Running()
	if len(run) == 0 {
		return -1, fmt.Errorf("hosts: add node: %w: nothing runs", ErrNoLeader)
	}
	via := c.Node(run[0]).APIAddr()
	n, err := c.newNode()
	if err != nil {
		return -1, err
	}
	i := c.index(n.ID)
	n.args = []string{"--join", via}
	if err := c.start(i); err != nil {
		return i, err
	}
	return i, c.waitMember(ctx, n, true)
}

// waitMember polls the leader until node n is (want) or is not (!want) a
// member at n's current raft address, or ctx ends.
func (c *Cluster) waitMember(ctx context.Context, n *Node, want bool) error {
	return c.leaderCall(ctx, func(ctx context.Context, l int) error {
		st, err := c.Status(ctx, l)
		if err != nil {
			return err
		}
		has := false
		for _, m := range st.GetMembers() {
			if m.GetId() == n.ID && m.GetRaftAddr() == n.RaftAddr() {
				has = true
			}
		}
		if has != want {
			return fmt.Errorf("hosts: %s member=%v, want %v", n.ID, has, want)
		}
		return nil
	})
}

// RemoveMember removes node i from the configuration through the leader,
// retrying until it succeeds or ctx ends. The process keeps running.
func (c *Cluster) RemoveMember(ctx context.Context, i int) error {
	id := c.Node(i).ID
	return c.leaderCall(ctx, func(ctx context.Context, l int) error {
		_, err := c.Cluster(l).RemoveMember(ctx, &ticketv1.RemoveMemberRequest{Id: id})
		return err
	})
}

// AddMember adds node i as a voter at its current addresses through the
// leader, retrying until it succeeds or ctx ends.
func (c *Cluster) AddMember(ctx context.Context, i int) error {
	n := c.Node(i)
	m := &ticketv1.Member{Id: n.ID, RaftAddr: n.RaftAddr(), ApiAddr: n.APIAddr(), Voter: true}
	return c.leaderCall(ctx, func(ctx context.Context, l int) error {
		_, err := c.Cluster(l).AddMember(ctx, &ticketv1.AddMemberRequest{Member: m})
		return err
	})
}

// Move restarts node i on a new address: kill -9, give its host a fresh
// address, start it with the same id and data, and tell the cluster its new
// addresses through membership (AddMember with the same id). It returns
// once the leader lists the new raft address, or ctx ends.
func (c *Cluster) Move(ctx context.Context, i int) error {
	if err := c.Kill(i); err != nil {
		return err
	}
	n := c.Node(i)
	if _, err := c.net.Readdress(n.Host); err != nil {
		return err
	}
	// It restarts from its Raft state; its --bootstrap entry names the old
	// addresses, which the node would refuse.
	n.mu.Lock()
	n.args = nil
	n.mu.Unlock()
	if err := c.start(i); err != nil {
		return err
	}
	// The leader refuses an api address that does not answer yet (AddMember
	// is refused when the new API address does not answer as that member,
	// etcd's --strict-reconfig-check; docs/api.md#errors): the
	// restarted process may not be listening at
	// once, so retry, as an operator would, until ctx ends.
	for {
		err := c.AddMember(ctx, i)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("hosts: move %s: %w", n.ID, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return c.waitMember(ctx, n, true)
}

// Close kills every node and removes the network. Called by t.Cleanup; if
// the test failed it logs the last lines of every node's log first.
func (c *Cluster) Close() {
	for i := range c.Len() {
		c.signal(i, syscall.SIGKILL)
		c.wait(i, 10*time.Second)
	}
	c.http.CloseIdleConnections()
	for i := range c.Len() {
		if msg := c.Node(i).UnexpectedExit(); msg != "" {
			c.t.Logf("hosts: %s (see the \"process exited\" line of its log)", msg)
		}
	}
	if c.t.Failed() {
		for i := range c.Len() {
			n := c.Node(i)
			c.t.Logf("hosts: last lines of %s (%s):\n%s", n.ID, n.LogFile, tail(n.LogFile, 30))
		}
	}
	if err := c.net.Close(); err != nil {
		c.t.Errorf("hosts: teardown: %v", err)
	}
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
