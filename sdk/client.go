package sdk

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/sdk/h2hold"
)

// Client talks to a ticketd cluster. It sends writes and linearizable reads
// to the leader, which it learns from Status and from the LeaderHint detail
// that non-leaders attach to Unavailable errors; it fails over between nodes
// and retries retryable failures with backoff and jitter until the call's
// ctx ends.
//
// A Client is safe for concurrent use. Create one per process and Close it
// when done.
type Client struct {
	cfg       config
	hc        *http.Client
	ownHC     bool
	endpoints []string // base URLs, in the caller's order
	ownerBase string   // prefix of owner ids made by this client
	ownerSeq  atomic.Uint64

	ctx    context.Context // cancelled by Close
	cancel context.CancelCauseFunc
	bg     sync.WaitGroup // lease renewers and background releases

	scheme     string          // "http" or "https": every URL the client builds uses it
	urls       bool            // New was given URLs ("https://h:p"), not bare host:port
	configured map[string]bool // host:port of the configured endpoints

	sessMu     sync.Mutex // guards sess and sessClosed; held while the default session is created
	sess       *Session   // the default session (session.go), nil until first used
	sessClosed bool       // Close has closed the default session: no new one
	// sessStop is cancelled when Close begins: it cuts short the creation
	// of a default session, which holds sessMu, so that Close never waits
	// for it.
	sessStop   context.Context
	sessCancel context.CancelFunc
	// kaStreams are the sessions' keep-alive streams (keepalivestream.go),
	// ended by Close through ctx.
	kaStreams keepAliveStreams

	mu     sync.Mutex
	nodes  map[string]*node // by base URL
	leader string           // base URL of the believed leader, "" if unknown
	next   int              // rotation over endpoints when no leader is known
	known  map[string]bool  // host:port of members listed by a configured endpoint's Status

	// answered is set once any server has answered this client (a
	// response, or an error a server sent): from then on refused
	// connections are retried as a restart causes them (connfail.go).
	answered atomic.Bool
}

// node is one server's connect clients.
type node struct {
	url     string
	lock    ticketv1connect.LockServiceClient
	cluster ticketv1connect.ClusterServiceClient
}

// New returns a client for the cluster whose API endpoints are given as
// "host:port" (plain HTTP/2, h2c; https with WithTLS) or as URLs
// ("http://…", "https://…"; all of one scheme). One reachable endpoint is
// enough; the client learns the leader from it. It follows a leader named by
// a server only to a configured endpoint or to a member listed by a
// configured endpoint's Status, and over the configured scheme: a server
// cannot send the client to an address of its choosing (or from https to
// http). New does no I/O.
//
// Errors: ErrInvalidArgument when endpoints is empty, an endpoint does not
// parse, or endpoints mix http and https.
func New(endpoints []string, opts ...Option) (*Client, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("sdk.New: %w: no endpoints", ErrInvalidArgument)
	}
	c := &Client{cfg: cfg, nodes: make(map[string]*node), configured: map[string]bool{}, known: map[string]bool{}}
	c.scheme = "http"
	if cfg.tls != nil {
		c.scheme = "https"
	}
	for i, e := range endpoints {
		if strings.Contains(e, "://") && i == 0 {
			c.scheme, _, _ = strings.Cut(strings.TrimSpace(e), "://")
			c.urls = true
		}
		u, err := c.baseURL(e)
		if err != nil {
			return nil, fmt.Errorf("sdk.New: %w: %w", ErrInvalidArgument, err)
		}
		if !strings.HasPrefix(u, c.scheme+"://") {
			return nil, fmt.Errorf("sdk.New: %w: endpoint %q: every endpoint must use %s", ErrInvalidArgument, e, c.scheme)
		}
		c.endpoints = append(c.endpoints, u)
		c.configured[hostOf(u)] = true
	}
	c.hc = cfg.httpClient
	if c.hc == nil {
		c.hc, c.ownHC = newHTTPClient(cfg.keepAlive, cfg.tls), true
	}
	c.ownerBase = ownerBase(cfg.ownerPrefix)
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	c.sessStop, c.sessCancel = context.WithCancel(context.Background())
	return c, nil
}

// Close first closes the client's default session, if one was opened,
// which releases every lock held under it in one committed entry (their
// Leases' Err is then ErrReleased; at most the request timeout is spent on
// it). It then stops every other lease's renewals and every other
// session's keep-alives, closing their Done channels (Err then wraps
// ErrClosed), cancels the client's other background work (best-effort
// releases after ambiguous acquisitions) and waits for it to end, and
// closes idle connections. Leases of their own (Lock with a ttl, WithLease)
// and sessions made with CreateSession are not released: the servers end
// them when their TTL runs out. Calls made after Close fail with ErrClosed.
// Close is idempotent and returns nil.
func (c *Client) Close() error {
	c.closeDefaultSession()
	c.mu.Lock()
	c.cancel(ErrClosed) // under mu: goBackground never Adds after Wait began
	c.mu.Unlock()
	c.bg.Wait()
	if c.ownHC {
		c.hc.CloseIdleConnections()
	}
	return nil
}

// Endpoints returns the base URLs the client was created with.
func (c *Client) Endpoints() []string { return append([]string(nil), c.endpoints...) }

// Leader returns the API address of the node the client currently believes
// to be the leader, or "" when it does not know, in the form New was given
// its endpoints: "host:port" (as the API's leader_addr and LeaderHint carry
// it) when New got bare addresses, a base URL ("https://host:port") when New
// got URLs. Either way the result can be passed back to New unchanged.
func (c *Client) Leader() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.urls || c.leader == "" {
		return c.leader
	}
	return hostOf(c.leader)
}

// newOwner makes a fresh owner id: unique per request, readable in ListLocks.
func (c *Client) newOwner() string {
	return fmt.Sprintf("%s-%d", c.ownerBase, c.ownerSeq.Add(1))
}

// ownerPrefixMax is the longest owner-id prefix kept (WithOwnerPrefix), in
// bytes: owner ids stay well within the servers' 128 bytes.
const ownerPrefixMax = 64

// ownerBase returns the part of the owner ids shared by one client's
// requests: prefix (default "hostname/pid"), cut to ownerPrefixMax bytes,
// then "/" and 16 random hex digits.
func ownerBase(prefix string) string {
	if prefix == "" {
		host, _ := os.Hostname()
		if len(host) > 40 {
			host = host[:40]
		}
		prefix = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	if len(prefix) > ownerPrefixMax {
		prefix = prefix[:ownerPrefixMax]
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return prefix + "/" + hex.EncodeToString(b[:])
}

// baseURL normalises "host:port" (with the client's scheme) or a URL into a
// base URL without a trailing slash.
func (c *Client) baseURL(addr string) (string, error) {
	addr = strings.TrimSpace(addr)
	if addr != "" && !strings.Contains(addr, "://") {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", fmt.Errorf("endpoint %q: %w", addr, err)
		}
		addr = c.scheme + "://" + addr
	}
	return baseURL(addr)
}

// hostOf returns the host:port of a base URL.
func hostOf(u string) string {
	_, h, ok := strings.Cut(u, "://")
	if !ok {
		h = u
	}
	h, _, _ = strings.Cut(h, "/")
	return strings.ToLower(h)
}

// baseURL normalises "host:port" (as http) or a URL into a base URL without
// a trailing slash.
func baseURL(addr string) (string, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return "", fmt.Errorf("empty endpoint")
	}
	if !strings.Contains(addr, "://") {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", fmt.Errorf("endpoint %q: %w", addr, err)
		}
		addr = "http://" + addr
	}
	return strings.TrimRight(addr, "/"), nil
}

// NewHTTPClient returns the HTTP client New uses when WithHTTPClient is not
// given, configured by opts (WithTLS, WithKeepAlive; the others do not
// concern it), for programs that call the generated Connect clients
// (sdk/gen/ticket/v1/ticketv1connect) directly and want to speak to
// ticketd as this client does. The caller closes its idle connections
// when done.
func NewHTTPClient(opts ...Option) *http.Client {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	return newHTTPClient(cfg.keepAlive, cfg.tls)
}

// newHTTPClient returns an HTTP/2-only client: h2c (prior knowledge) for
// http:// URLs, HTTP/2 over TLS (with tlsCfg, when set) for https://.
// Connections are pinged after keepAlive of silence and closed when a ping
// goes unanswered for keepAlive, so calls to a stopped node fail instead of
// hanging.
func newHTTPClient(keepAlive time.Duration, tlsCfg *tls.Config) *http.Client {
	dial := (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 15 * time.Second}).DialContext
	return newHTTPClientOver(dial, h2hold.Config{}, keepAlive, tlsCfg)
}

// newHTTPClientOver is newHTTPClient dialling its TCP connections with
// dial, below a HEADERS hold configured by hold (package h2hold): on an
// h2c connection a request's HEADERS frame goes out in one write with its
// first DATA frame, where Go's HTTP/2 transport writes (flushes) each
// apart, so the server's frame reader is woken once per call, not twice
// (docs/benchmarks.md, "Where a lock cycle's time goes at one client"). A
// request whose body does not follow at once (a stream the caller has not
// sent on yet) has its headers written after the hold (1 ms by default).
// TLS connections are dialled through the same function but not held:
// their frames are not visible below crypto/tls, and the hold, seeing a
// ClientHello as the first write, stands aside.
func newHTTPClientOver(dial h2hold.DialFunc, hold h2hold.Config, keepAlive time.Duration, tlsCfg *tls.Config) *http.Client {
	tr := &http.Transport{
		DialContext:         h2hold.Dialer(dial, hold),
		ForceAttemptHTTP2:   true,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 5 * time.Second,
		TLSClientConfig:     tlsCfg,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: keepAlive,
			PingTimeout:     keepAlive,
		},
	}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetHTTP2(true)
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}

// goBackground runs fn in a goroutine that Close waits for, passing a ctx
// that Close cancels. It returns false, without running fn, once the client
// is closed.
func (c *Client) goBackground(fn func(ctx context.Context)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return false
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		fn(c.ctx)
	}()
	return true
}

// nodeFor returns the connect clients for a base URL, creating them once.
// Called with c.mu held.
func (c *Client) nodeFor(url string) *node {
	if n, ok := c.nodes[url]; ok {
		return n
	}
	opts := append([]connect.ClientOption(nil), c.cfg.connectOpts...)
	if c.cfg.grpc {
		opts = append(opts, connect.WithGRPC())
	}
	if c.cfg.bearerToken != "" {
		opts = append(opts, connect.WithInterceptors(bearerInterceptor{header: "Bearer " + c.cfg.bearerToken}))
	}
	n := &node{
		url:     url,
		lock:    ticketv1connect.NewLockServiceClient(c.hc, url, opts...),
		cluster: ticketv1connect.NewClusterServiceClient(c.hc, url, opts...),
	}
	c.nodes[url] = n
	return n
}

// route picks the node for the next attempt: the known leader when toLeader
// is set and one is known, else the next endpoint in rotation.
func (c *Client) route(toLeader bool) (n *node, isLeader bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if toLeader && c.leader != "" {
		return c.nodeFor(c.leader), true
	}
	return c.nodeFor(c.endpoints[c.next%len(c.endpoints)]), false
}

// setLeader records a leader address learnt from Status or a LeaderHint,
// if it names a configured endpoint or a known member (trusted); the URL
// always takes the configured scheme. It returns whether the believed
// leader changed.
func (c *Client) setLeader(addr string) bool {
	host := hostOf(strings.TrimSpace(addr))
	if _, _, err := net.SplitHostPort(host); err != nil {
		return false
	}
	u := c.scheme + "://" + host
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.configured[host] && !c.known[host] {
		return false // a hint to an address no configured endpoint vouches for
	}
	if c.leader == u {
		return false
	}
	c.leader = u
	return true
}

// nodeFailed forgets n as leader and moves the rotation past it.
func (c *Client) nodeFailed(n *node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader == n.url {
		c.leader = ""
	}
	if c.endpoints[c.next%len(c.endpoints)] == n.url {
		c.next++
	}
}

// discover asks n for the leader and records it. It returns the leader's
// node, or n itself when n knows no leader.
func (c *Client) discover(ctx context.Context, n *node, timeout time.Duration) (*node, error) {
	if timeout <= 0 {
		timeout = c.cfg.requestTimeout
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := n.cluster.Status(actx, statusRequest())
	if err != nil {
		return nil, err
	}
	c.answered.Store(true)
	c.learnMembers(n, st.GetMembers())
	if st.GetLeaderAddr() == "" || !c.setLeader(st.GetLeaderAddr()) && c.Leader() == "" {
		return n, nil
	}
	ln, _ := c.route(true)
	return ln, nil
}

// learnMembers records the API addresses of members listed by n's Status
// when n is a configured endpoint: those are the addresses leader hints may
// name.
func (c *Client) learnMembers(n *node, members []*ticketv1.Member) {
	if !c.configured[hostOf(n.url)] {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range members {
		if a := m.GetApiAddr(); a != "" {
			c.known[hostOf(a)] = true
		}
	}
}

// callSpec describes one logical call for invoke.
type callSpec struct {
	op       string        // "acquire", "renew", ... for errors
	key      string        // lock key for errors and AmbiguousError ("" for cluster ops)
	owner    string        // Acquire owner for AmbiguousError
	toLeader bool          // route to the leader (false: any node, in rotation)
	timeout  time.Duration // per-attempt timeout; 0 = only ctx bounds an attempt
	backoff  time.Duration // cap of the retry backoff; 0 = the client's
	mutates  bool          // an unresolved failure is ambiguous
}

// outcome describes how a successful invoke went.
type outcome struct {
	// sent is the local send time of the attempt that succeeded.
	sent time.Time
	// firstMaybe is the send time of the earliest attempt that may have
	// reached a server (sent, when no earlier attempt may have).
	firstMaybe time.Time
	// maybeEarlier is set when an earlier attempt may have taken effect.
	maybeEarlier bool
}

// leaderHintQuickRetries bounds, per call, the retries made at once (with
// no backoff) because an error named a new leader: enough to follow a
// leader change or two, not a loop between nodes that name each other.
const leaderHintQuickRetries = 3

// invoke runs fn against the cluster until it succeeds, fails definitively,
// or ctx (or the client) ends. Unavailable, timeouts and transport failures
// are retried on the leader named by a LeaderHint, or on the next endpoint,
// after an exponential backoff with jitter; a fresh leader hint is followed
// at once. When spec.mutates and an attempt that may have taken effect
// failed without being resolved, the error is an *AmbiguousError.
func invoke[R any](ctx context.Context, c *Client, spec callSpec, fn func(context.Context, *node) (R, error)) (R, outcome, error) {
	var (
		zero    R
		out     outcome
		last    error
		maybe   bool // an attempt that may have taken effect failed
		attempt int
		quick   int // retries made at once after a fresh leader hint (≤ leaderHintQuickRetries per call)
		refused = refusals{}
	)
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	unhook := context.AfterFunc(c.ctx, func() { stop(ErrClosed) })
	defer unhook()

	giveUp := func() (R, outcome, error) {
		return zero, out, ambiguousIf(spec, maybe, giveUpErr(ctx, spec.op, spec.key, last))
	}
	for ; ; attempt++ {
		if ctx.Err() != nil {
			return giveUp()
		}
		n, isLeader := c.route(spec.toLeader)
		if spec.toLeader && !isLeader {
			ln, err := c.discover(ctx, n, spec.timeout)
			if ferr := c.connFinal(ctx, n, spec, err, refused); ferr != nil {
				return zero, out, ambiguousIf(spec, maybe, ferr)
			}
			if err != nil && refusedCredentials(err) {
				// Every node would refuse the same credentials: final.
				return zero, out, wrapErr(spec.op, spec.key, err)
			}
			if err != nil {
				// Nothing was sent for the call itself: not ambiguous.
				last = err
				c.nodeFailed(n)
				if !c.sleep(ctx, spec.backoff, attempt-quick) {
					return giveUp()
				}
				continue
			}
			n = ln
		}
		actx, cancel := ctx, context.CancelFunc(func() {})
		if spec.timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, spec.timeout)
		}
		sent := time.Now()
		r, err := fn(actx, n)
		cancel()
		if err == nil {
			c.answered.Store(true)
			out.sent = sent
			if out.firstMaybe.IsZero() {
				out.firstMaybe = sent
			}
			out.maybeEarlier = maybe
			return r, out, nil
		}
		last = err
		if ferr := c.connFinal(ctx, n, spec, err, refused); ferr != nil {
			out.maybeEarlier = maybe
			return zero, out, ambiguousIf(spec, maybe, ferr)
		}
		kind := classify(err)
		if ctx.Err() != nil && kind != failNotSent {
			// Cut short by the caller's ctx: the request may be in flight.
			kind = failRetry
		}
		switch kind {
		case failFinal:
			out.maybeEarlier = maybe
			return zero, out, wrapErr(spec.op, spec.key, err)
		case failRetry:
			if !maybe {
				maybe = true
				out.firstMaybe = sent
			}
		}
		if hint := leaderHint(err); hint != "" {
			if c.setLeader(hint) && quick < leaderHintQuickRetries {
				quick++
				continue // a new leader named: try it at once
			}
		} else {
			c.nodeFailed(n)
		}
		if !c.sleep(ctx, spec.backoff, attempt-quick) {
			return giveUp()
		}
	}
}

// connFinal returns the final error of an attempt at n that failed with err
// for a cause of the client's settings (connfail.go): a certificate one side
// refuses, a plaintext request to a TLS server, or every endpoint refusing
// the connection before any server answered. It returns nil for nil, for an
// error a server sent (noting that a server answered), and for causes
// retrying can fix.
func (c *Client) connFinal(ctx context.Context, n *node, spec callSpec, err error, refused refusals) error {
	if err == nil {
		return nil
	}
	if connect.IsWireError(err) {
		c.answered.Store(true)
		return nil
	}
	if cause := certCause(err); cause != nil {
		return connErr(spec.op, spec.key, cause, err)
	}
	if refused.add(c, n, err) {
		return connErr(spec.op, spec.key, ErrConnectionRefused, err)
	}
	if c.plaintextToTLS(ctx, n, err) {
		return connErr(spec.op, spec.key, ErrServerSpeaksTLS, err)
	}
	return nil
}

// ambiguousIf wraps err in an *AmbiguousError when spec's call changes
// state and an earlier attempt may have taken effect.
func ambiguousIf(spec callSpec, maybe bool, err error) error {
	if spec.mutates && maybe {
		return &AmbiguousError{Op: spec.op, Key: spec.key, Owner: spec.owner, Err: err}
	}
	return err
}

// sleep waits for the n-th backoff delay (equal jitter), capped at maxD when
// that is below the client's cap, or until ctx ends; it returns false if ctx
// ended.
func (c *Client) sleep(ctx context.Context, maxD time.Duration, n int) bool {
	maxD = c.backoffCap(maxD)
	d := backoff(min(c.cfg.backoffBase, maxD), maxD, n)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// backoffCap returns the cap of a call's retry backoff: maxD when it is
// positive and below the client's cap, else the client's cap.
func (c *Client) backoffCap(maxD time.Duration) time.Duration {
	if maxD <= 0 || maxD > c.cfg.backoffMax {
		return c.cfg.backoffMax
	}
	return maxD
}

// backoff returns the n-th retry delay: d = min(base·2ⁿ, max), drawn
// uniformly from [d/2, d] so that clients retrying together spread out
// ("equal jitter").
func backoff(base, maxD time.Duration, n int) time.Duration {
	n = max(n, 0)
	d := maxD
	if n < 30 && base<<n < maxD && base<<n > 0 {
		d = base << n
	}
	half := d / 2
	return half + time.Duration(mrand.Int64N(int64(half)+1))
}
