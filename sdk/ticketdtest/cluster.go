package ticketdtest

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/sdk/ticketdtest/procstop"
)

// Options configures Start. The zero value starts three hashicorp nodes.
type Options struct {
	// Nodes is the cluster size; default 3.
	Nodes int
	// Backend is the consensus backend name ("hashicorp", "etcd"); default "hashicorp".
	Backend string
	// Args are extra `ticketd serve` flags given to every node, such as
	// "--lease-min-ms=10" or "--raft-election-timeout-ms=500". Unless they
	// set --raft-election-timeout-ms or --raft-heartbeat-ms, the nodes run
	// with 1000 ms / 100 ms (see Start), not the shipped 400 ms / 40 ms.
	Args []string
	// Env are extra environment variables (KEY=VALUE) for every node.
	Env []string
	// StartTimeout bounds the wait for the first leader; default 30s.
	StartTimeout time.Duration
	// TLS, when set, starts the nodes with TLS (see TLS) and makes the
	// cluster's own clients speak https.
	TLS *TLS
	// BearerToken, when set, is sent by the cluster's own clients (Lock,
	// Cluster, Status) as `Authorization: Bearer`, for nodes started with
	// --auth-tokens-file (in Args) that list its digest.
	BearerToken string
	// DataRoot, when set, is the directory the nodes' data dirs are made
	// in (DataRoot/n1, DataRoot/n2, ...) instead of the cluster's temporary
	// directory, for example a file system of the test's own; the log files
	// stay in the temporary directory.
	DataRoot string
}

// Node describes one ticketd process of a Cluster. Its fields do not change
// across restarts.
type Node struct {
	// ID is the node id (n1, n2, ...).
	ID string
	// APIAddr is the client API host:port (Connect, gRPC, gRPC-Web; HTTP/1.1 and h2c).
	APIAddr string
	// RaftAddr is the peer host:port.
	RaftAddr string
	// DataDir is the node's data directory.
	DataDir string
	// LogFile receives the node's stdout and stderr (JSON logs), appended across restarts.
	LogFile string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when the current process has exited
	args   []string
}

// PID returns the current process id, or 0 when the node is not running.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil || isClosed(n.exited) {
		return 0
	}
	return n.cmd.Process.Pid
}

// ExitCode returns the exit status of the node's last process and true once
// it has exited (-1 when a signal ended it), or false while it runs or
// before it was started.
func (n *Node) ExitCode() (int, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || !isClosed(n.exited) {
		return 0, false
	}
	return n.cmd.ProcessState.ExitCode(), true
}

// Running reports whether the node's process is alive (possibly stopped).
func (n *Node) Running() bool { return n.PID() != 0 }

func isClosed(ch chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Cluster is a running set of ticketd processes. Its methods may be called
// from the test goroutine; they are safe for concurrent use.
type Cluster struct {
	t       testing.TB
	bin     string
	opts    Options
	nodes   []*Node
	http    *http.Client
	lock    []ticketv1connect.LockServiceClient
	cluster []ticketv1connect.ClusterServiceClient
	stopped map[int]bool
	mu      sync.Mutex
	tls     *tls.Config // nil without Options.TLS
	scheme  string      // "http" or "https"
}

// H2CClient returns an HTTP client that speaks HTTP/2 without TLS (prior
// knowledge) to http:// URLs, as gRPC clients do.
func H2CClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}

// FreeAddr returns a loopback host:port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return FreeAddrs(t, 1)[0]
}

// FreeAddrs returns n distinct loopback host:ports that were free a moment
// ago: all n are held open while they are chosen, so the kernel cannot hand
// out one port twice, and none is one FreeAddrs returned before in this
// process.
//
// The ports come from below the kernel's ephemeral range (Linux's default
// ip_local_port_range starts at 32768): a port from listen(":0") is an
// ephemeral one, which any outgoing connection of any process may take as
// its source port between the pick and the node's own bind, and on a busy
// machine running several test clusters one did ("bind: address already in
// use" at a node's start). Ports below the range are never handed out that
// way; a random start spreads concurrent test processes apart.
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	addrs, err := PickAddrs(n)
	if err != nil {
		t.Fatalf("ticketdtest: %v", err)
	}
	return addrs
}

// PickAddrs is FreeAddrs for callers without a testing.TB (a benchmark's
// clusters): the same ports, the same rule, one record of the ports handed
// out per process, and the same claim against other test processes on the
// machine (reservePort). Errors: none free below the ephemeral range.
func PickAddrs(n int) ([]string, error) {
	pickMu.Lock()
	defer pickMu.Unlock()
	out := make([]string, 0, n)
	for tries := 0; len(out) < n; tries++ {
		if tries > 20000 {
			return nil, fmt.Errorf("no free port below the ephemeral range")
		}
		port := lowPortMin + rand.IntN(lowPortMax-lowPortMin)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if pickedPorts[addr] || !reservePort(port) {
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // in use
		}
		defer ln.Close()
		pickedPorts[addr] = true
		out = append(out, addr)
	}
	return out, nil
}

// The range FreeAddrs picks from: [lowPortMin, lowPortMax), below Linux's
// default ephemeral range (32768-60999) and above most services' ports.
const (
	lowPortMin = 20000
	lowPortMax = 32768
)

// pickMu guards pickedPorts, every address FreeAddrs returned in this process.
var (
	pickMu      sync.Mutex
	pickedPorts = map[string]bool{}
)

// Start starts a cluster of opts.Nodes ticketd processes bootstrapped
// together, waits until they agree on a leader, and registers Close with
// t.Cleanup.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.Backend == "" {
		opts.Backend = "hashicorp"
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 30 * time.Second
	}
	c := &Cluster{t: t, bin: Binary(t), opts: opts, http: H2CClient(), stopped: map[int]bool{}, scheme: "http"}
	if opts.TLS != nil {
		tc, err := opts.TLS.ClientConfig()
		if err != nil {
			t.Fatalf("ticketdtest: %v", err)
		}
		c.tls, c.scheme, c.http = tc, "https", TLSClient(tc)
	}
	dir := t.TempDir()
	dataRoot := dir
	if opts.DataRoot != "" {
		dataRoot = opts.DataRoot
	}
	addrs := FreeAddrs(t, 2*opts.Nodes)
	var peers []string
	for i := range opts.Nodes {
		n := &Node{
			ID:       fmt.Sprintf("n%d", i+1),
			APIAddr:  addrs[2*i],
			RaftAddr: addrs[2*i+1],
		}
		n.DataDir = filepath.Join(dataRoot, n.ID)
		n.LogFile = filepath.Join(dir, n.ID+".log")
		peers = append(peers, n.ID+"="+n.RaftAddr+"/"+n.APIAddr)
		c.nodes = append(c.nodes, n)
		copts := clientOptions(opts)
		c.lock = append(c.lock, ticketv1connect.NewLockServiceClient(c.http, c.scheme+"://"+n.APIAddr, copts...))
		c.cluster = append(c.cluster, ticketv1connect.NewClusterServiceClient(c.http, c.scheme+"://"+n.APIAddr, copts...))
	}
	args := opts.Args
	if !hasFlag(args, "--raft-election-timeout-ms") && !hasFlag(args, "--raft-heartbeat-ms") {
		// etcd's own 1 s / 100 ms, not the shipped 400 ms / 40 ms: test
		// processes share a loaded CI machine, where a starved leader
		// would lose a 400 ms election timeout in the middle of a test
		// about something else. The shipped timing is what `make run`
		// and ticketbench's failover measurement use.
		args = append([]string{"--raft-election-timeout-ms=1000", "--raft-heartbeat-ms=100"}, args...)
	}
	if !hasFlag(args, "--bootstrap-probe-wait-ms") {
		// The nodes of a test cluster start together, so each waits the
		// probe out before it bootstraps (server.DefaultBootstrapProbeWait,
		// 3 s); 1 s is ample for a running member to answer on loopback.
		args = append([]string{"--bootstrap-probe-wait-ms=1000"}, args...)
	}
	for _, n := range c.nodes {
		n.args = append([]string{"serve",
			"--id", n.ID,
			"--api-addr", n.APIAddr,
			"--raft-addr", n.RaftAddr,
			"--data-dir", n.DataDir,
			"--backend", opts.Backend,
			"--bootstrap", strings.Join(peers, ","),
		}, args...)
		if opts.TLS != nil {
			n.args = append(n.args, opts.TLS.flags(n.ID)...)
		}
	}
	t.Cleanup(c.Close)
	for i := range c.nodes {
		if err := c.start(i); err != nil {
			t.Fatalf("ticketdtest: start %s: %v", c.nodes[i].ID, err)
		}
	}
	c.WaitLeader(t, opts.StartTimeout)
	return c
}

// start launches node i's process.
func (c *Cluster) start(i int) error {
	n := c.nodes[i]
	logf, err := os.OpenFile(n.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, n.args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Env = append(os.Environ(), c.opts.Env...)
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	n.mu.Lock()
	n.cmd, n.exited = cmd, exited
	n.mu.Unlock()
	c.mu.Lock()
	delete(c.stopped, i)
	c.mu.Unlock()
	return nil
}

// Len returns the number of nodes.
func (c *Cluster) Len() int { return len(c.nodes) }

// Node returns node i (0-based).
func (c *Cluster) Node(i int) *Node { return c.nodes[i] }

// TLSConfig returns the client TLS config of the cluster's own clients (nil
// without Options.TLS), for sdk.WithTLS.
func (c *Cluster) TLSConfig() *tls.Config { return c.tls }

// URL returns node i's API base URL (http:// or, with TLS, https://).
func (c *Cluster) URL(i int) string { return c.scheme + "://" + c.nodes[i].APIAddr }

// HTTPClient returns the client (h2c, or HTTP/2 over TLS) behind Lock and Cluster.
func (c *Cluster) HTTPClient() *http.Client { return c.http }

// Lock returns a LockService client of node i (Connect protocol over h2c).
func (c *Cluster) Lock(i int) ticketv1connect.LockServiceClient { return c.lock[i] }

// Cluster returns a ClusterService client of node i.
func (c *Cluster) Cluster(i int) ticketv1connect.ClusterServiceClient { return c.cluster[i] }

// process returns node i's process, or nil when it is not running.
func (c *Cluster) process(i int) *os.Process {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && n.cmd.Process != nil && !isClosed(n.exited) {
		return n.cmd.Process
	}
	return nil
}

// signal sends sig to node i's process, if running.
func (c *Cluster) signal(i int, sig syscall.Signal) {
	if p := c.process(i); p != nil {
		_ = p.Signal(sig)
	}
}

// wait blocks until node i's process has exited or d passes; it reports whether it exited.
func (c *Cluster) wait(i int, d time.Duration) bool {
	n := c.nodes[i]
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

// Kill sends SIGKILL to node i (kill -9: no shutdown, no flush beyond what
// was already synced) and waits for the process to exit.
func (c *Cluster) Kill(i int) {
	c.signal(i, syscall.SIGKILL)
	c.wait(i, time.Minute)
	c.mu.Lock()
	delete(c.stopped, i)
	c.mu.Unlock()
}

// Stop pauses node i with SIGSTOP: it keeps its sockets but answers nothing,
// like a stalled process or a long GC pause. It returns once every thread
// of the node has stopped (procstop.Stop), so that nothing sent to the node
// afterwards is received, synced or acknowledged before Cont; it fails the
// test when they do not stop. Cont resumes it.
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	if err := c.Pause(i); err != nil {
		c.t.Fatalf("ticketdtest: stop %s: %v", c.nodes[i].ID, err)
	}
}

// Pause is Stop returning its error instead of failing the test, for a
// caller on a goroutine other than the test's (a fault injector). On error
// the node runs on (procstop.Stop continues it).
func (c *Cluster) Pause(i int) error {
	if p := c.process(i); p != nil {
		if err := procstop.Stop(p); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.stopped[i] = true
	c.mu.Unlock()
	return nil
}

// Cont resumes node i after Stop (SIGCONT).
func (c *Cluster) Cont(i int) {
	c.signal(i, syscall.SIGCONT)
	c.mu.Lock()
	delete(c.stopped, i)
	c.mu.Unlock()
}

// Terminate shuts node i down gracefully (SIGTERM) and waits up to 15s for
// it to exit, then kills it.
func (c *Cluster) Terminate(i int) {
	c.Cont(i)
	c.signal(i, syscall.SIGTERM)
	if !c.wait(i, 15*time.Second) {
		c.Kill(i)
	}
}

// Restart starts node i again with the same id, addresses and data; a running
// node is terminated gracefully first. It does not wait for a leader.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.nodes[i].Running() {
		c.Terminate(i)
	}
	if err := c.start(i); err != nil {
		c.t.Fatalf("ticketdtest: restart %s: %v", c.nodes[i].ID, err)
	}
}

// Running returns the indexes of nodes whose process is alive and not paused.
func (c *Cluster) Running() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i, n := range c.nodes {
		if n.Running() && !c.stopped[i] {
			out = append(out, i)
		}
	}
	return out
}

// Status asks node i for its Status with a one-second timeout.
func (c *Cluster) Status(i int) (*ticketv1.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.cluster[i].Status(ctx, &ticketv1.StatusRequest{})
}

// WaitLeader waits up to timeout until every running, unpaused node names the
// same leader, that leader is one of them, and its API address is known to
// all; it returns the leader's index. It fails the test on timeout.
func (c *Cluster) WaitLeader(t testing.TB, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if i, ok := c.agreedLeader(); ok {
			return i
		}
		if len(c.Running()) == 0 {
			t.Fatalf("ticketdtest: no node is running (see the logs below)")
		}
		if time.Now().After(deadline) {
			t.Fatalf("ticketdtest: no leader agreed on within %v", timeout)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func (c *Cluster) agreedLeader() (int, bool) {
	running := c.Running()
	leader := ""
	for _, i := range running {
		st, err := c.Status(i)
		if err != nil || st.GetLeaderId() == "" || st.GetLeaderAddr() == "" {
			return 0, false
		}
		if leader != "" && st.GetLeaderId() != leader {
			return 0, false
		}
		leader = st.GetLeaderId()
	}
	for _, i := range running {
		if c.nodes[i].ID == leader {
			return i, true
		}
	}
	return 0, false
}

// Leader returns the index of the leader, waiting up to 30s for one.
func (c *Cluster) Leader(t testing.TB) int {
	t.Helper()
	return c.WaitLeader(t, 30*time.Second)
}

// Close stops every node (resuming paused ones, SIGTERM, then SIGKILL after
// 15s). If the test failed, it logs the last lines of each node's log.
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for i := range c.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); c.Terminate(i) }()
	}
	wg.Wait()
	c.http.CloseIdleConnections()
	if c.t.Failed() {
		for _, n := range c.nodes {
			c.t.Logf("ticketdtest: last lines of %s:\n%s", n.LogFile, tail(n.LogFile, 40))
		}
	}
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// hasFlag reports whether args set flag (as "--flag=v" or "--flag v").
func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}
