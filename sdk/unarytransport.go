package sdk

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// This file is the built-in HTTP client's transport
// (docs/design.md#sdk-transport). A Connect unary call whose deadline lies
// within the request timeout travels over an HTTP/1.1 keep-alive
// connection of its own; streams (Watch, Snapshot, bidirectional streams),
// gRPC, and unary calls that may wait longer (an Acquire waiting in a queue
// without a short deadline) travel over HTTP/2.
//
// Why: on an HTTP/2 connection a unary call costs both ends a stream, HPACK,
// flow control and hops between the connection's reader, writer and
// handler goroutines; net/http serves an HTTP/1.1 connection's requests on
// that connection's own goroutine, with none of that
// (docs/benchmarks.md#unary-calls-over-http11 measures the difference). A
// call that holds its connection only until its deadline, at most the
// request timeout, keeps the number of connections to a node bounded by the
// calls in flight; a call that may wait for minutes stays multiplexed on
// HTTP/2.
//
// HTTP/2 finds a silent server (a stopped process: its kernel still accepts
// connections and acknowledges bytes) by pinging the connection after
// keepAlive of silence and closing it when the ping is not answered within
// keepAlive. HTTP/1.1 has no ping, and nothing can be sent on a connection
// while its request is outstanding, so each call has a watchdog: once the
// call has waited keepAlive and nothing has been heard from its node for
// keepAlive, the node is probed with a GET of its liveness path over
// HTTP/2; when no answer comes within keepAlive, the call fails as a
// transport error (retried on another node) — the same bound of 2 ×
// keepAlive as HTTP/2's pings. A probe is shared by the calls to one node
// that wait at the same time; under load, answers to other calls keep a
// node heard and no probe is sent.

// unaryConnsPerNode caps the HTTP/1.1 connections to one node (open and
// idle): each carries one call at a time, so beyond it calls wait for a
// connection, at most until their deadline (within the request timeout).
// It is well above the concurrency of a busy client process (ticketbench
// drives 256 clients through one) and a quarter of a node's default
// limits.max_connections (4096).
const unaryConnsPerNode = 1024

// livenessPath is the path of the servers' liveness probe (the API's
// /livez, answered while the process serves HTTP). Any HTTP answer, even
// an error status from a proxy or an older server, proves that the far end
// is not silent.
const livenessPath = "/livez"

// connectTimeoutHeader carries a Connect call's deadline in milliseconds
// (the Connect protocol's Connect-Timeout-Ms; absent without a deadline).
const connectTimeoutHeader = "Connect-Timeout-Ms"

// errServerSilent fails an HTTP/1.1 call whose node answered neither the
// call nor a liveness probe within the keep-alive. It does not wrap a
// context error: connect reports it as Unavailable, which the client
// retries on another node.
var errServerSilent = errors.New("ticketd: the server stopped answering (no answer to a liveness probe within the keep-alive)")

// errPlaintextRefused is the error of a plaintext HTTP/1.1 request that a
// TLS server answered with net/http's "400 Bad Request: Client sent an
// HTTP request to an HTTPS server" (connfail.go tells it apart).
var errPlaintextRefused = errors.New("the server answered 400: client sent an HTTP request to an HTTPS server")

// plaintextRefusedText is the body net/http's TLS server writes to a
// connection whose first bytes look like an HTTP/1.x request.
const plaintextRefusedText = "Client sent an HTTP request to an HTTPS server"

// NewHTTPClient returns the HTTP client New builds when WithHTTPClient is
// not given, set up by opts (WithTLS, WithKeepAlive, WithRequestTimeout;
// other options are ignored): Connect unary calls with a deadline within
// the request timeout over HTTP/1.1 keep-alive connections, everything
// else over HTTP/2 (h2c for http:// URLs, ALPN over TLS for https://),
// every call watched for a silent server. It is for programs that call the
// generated Connect clients (ticketv1connect) themselves; give each unary
// call a deadline (as a Client gives each attempt the request timeout) for
// it to take HTTP/1.1. Close it with CloseIdleConnections.
func NewHTTPClient(opts ...Option) *http.Client {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	return newHTTPClient(cfg)
}

// newHTTPClient builds the client NewHTTPClient describes from cfg.
func newHTTPClient(cfg config) *http.Client {
	dial := (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 15 * time.Second}).DialContext
	h2 := &http.Transport{
		DialContext:         dial,
		ForceAttemptHTTP2:   true,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 5 * time.Second,
		TLSClientConfig:     cfg.tls,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: cfg.keepAlive,
			PingTimeout:     cfg.keepAlive,
		},
		Protocols: new(http.Protocols),
	}
	h2.Protocols.SetHTTP2(true)
	h2.Protocols.SetUnencryptedHTTP2(true)
	h1 := &http.Transport{
		DialContext:         dial,
		IdleConnTimeout:     90 * time.Second, // below the servers' limits.idle_timeout_ms (120 s): the client closes first
		TLSHandshakeTimeout: 5 * time.Second,
		TLSClientConfig:     http1TLS(cfg.tls),
		MaxIdleConnsPerHost: unaryConnsPerNode,
		MaxConnsPerHost:     unaryConnsPerNode,
		DisableCompression:  true, // connect negotiates its own compression
		Protocols:           new(http.Protocols),
	}
	h1.Protocols.SetHTTP1(true)
	return &http.Client{Transport: &unaryTransport{
		h1: h1, h2: h2, keepAlive: cfg.keepAlive,
		maxMS: cfg.requestTimeout.Milliseconds(),
	}}
}

// http1TLS returns a copy of cfg that offers only HTTP/1.1 by ALPN, so that
// a server preferring h2 cannot select it for the HTTP/1.1 transport; nil
// for nil.
func http1TLS(cfg *tls.Config) *tls.Config {
	if cfg == nil {
		return nil
	}
	c := cfg.Clone()
	c.NextProtos = []string{"http/1.1"}
	return c
}

// unaryTransport sends Connect unary calls with a deadline within maxMS
// over h1 (watched), everything else over h2. Safe for concurrent use.
type unaryTransport struct {
	h1, h2    *http.Transport
	keepAlive time.Duration
	maxMS     int64 // longest deadline, in ms, of a call sent over h1

	nodes sync.Map // URL host → *nodeLiveness
}

func (t *unaryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.overHTTP1(req) {
		return t.h2.RoundTrip(req)
	}
	n := t.node(req)
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &watchdog{t: t, n: n, ctx: ctx, cancel: cancel}
	w.timer = time.AfterFunc(t.keepAlive, w.check)
	resp, err := t.h1.RoundTrip(req.WithContext(ctx))
	if err != nil {
		err = w.failure(err)
		w.end()
		return nil, err
	}
	n.heard.Store(time.Now().UnixNano())
	if req.URL.Scheme == "http" && resp.StatusCode == http.StatusBadRequest && resp.ProtoMinor == 0 {
		if refused := plaintextRefused(resp); refused {
			w.end()
			return nil, errPlaintextRefused
		}
	}
	resp.Body = &watchedBody{ReadCloser: resp.Body, w: w}
	return resp, nil
}

// CloseIdleConnections closes both transports' idle connections
// (http.Client.CloseIdleConnections calls it).
func (t *unaryTransport) CloseIdleConnections() {
	t.h1.CloseIdleConnections()
	t.h2.CloseIdleConnections()
}

// overHTTP1 reports whether req is a Connect unary call (not a Connect
// stream, whose content type is application/connect+…, nor gRPC or
// gRPC-Web) whose deadline is at most maxMS away.
func (t *unaryTransport) overHTTP1(req *http.Request) bool {
	v := req.Header[connectTimeoutHeader]
	if len(v) != 1 {
		return false
	}
	if ct := req.Header["Content-Type"]; len(ct) == 1 &&
		(strings.HasPrefix(ct[0], "application/connect+") || strings.HasPrefix(ct[0], "application/grpc")) {
		return false
	}
	ms, err := strconv.ParseInt(v[0], 10, 64)
	return err == nil && ms <= t.maxMS
}

// node returns the liveness record of req's node, creating it once.
func (t *unaryTransport) node(req *http.Request) *nodeLiveness {
	if n, ok := t.nodes.Load(req.URL.Host); ok {
		return n.(*nodeLiveness)
	}
	n, _ := t.nodes.LoadOrStore(req.URL.Host, &nodeLiveness{probeURL: req.URL.Scheme + "://" + req.URL.Host + livenessPath})
	return n.(*nodeLiveness)
}

// probe reports whether the node answers a GET of probeURL over HTTP/2
// within the keep-alive. It is not tied to one call: its answer is shared
// by every call to the node that waits meanwhile.
func (t *unaryTransport) probe(probeURL string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), t.keepAlive)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, probeURL, nil)
	if err != nil {
		return false
	}
	resp, err := t.h2.RoundTrip(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	return true
}

// nodeLiveness is what the transport knows of one node's liveness.
type nodeLiveness struct {
	probeURL string
	heard    atomic.Int64 // Unix ns of the node's last answer (a call's or a probe's)

	mu      sync.Mutex
	probing *livenessProbe // the probe in flight, nil if none
}

// livenessProbe is one probe of a node; done is closed once alive is set.
type livenessProbe struct {
	done  chan struct{}
	alive bool
}

// alive probes the node with t, or waits for the probe in flight, and
// reports its answer.
func (n *nodeLiveness) alive(t *unaryTransport) bool {
	n.mu.Lock()
	p := n.probing
	if p != nil {
		n.mu.Unlock()
		<-p.done
		return p.alive
	}
	p = &livenessProbe{done: make(chan struct{})}
	n.probing = p
	n.mu.Unlock()

	p.alive = t.probe(n.probeURL)
	if p.alive {
		n.heard.Store(time.Now().UnixNano())
	}
	n.mu.Lock()
	n.probing = nil
	n.mu.Unlock()
	close(p.done)
	return p.alive
}

// watchdog watches one HTTP/1.1 call until its response body ends.
type watchdog struct {
	t      *unaryTransport
	n      *nodeLiveness
	ctx    context.Context // the call's, cancelled with errServerSilent when the node is silent
	cancel context.CancelCauseFunc
	timer  *time.Timer
	ended  atomic.Bool
}

// check runs keepAlive after the call started, and again after each
// keepAlive the node was heard in: when the node has been silent for
// keepAlive, it probes it and fails the call if the probe goes unanswered.
func (w *watchdog) check() {
	if w.ctx.Err() != nil {
		return
	}
	silent := time.Since(time.Unix(0, w.n.heard.Load()))
	if silent < w.t.keepAlive {
		w.timer.Reset(w.t.keepAlive - silent)
		return
	}
	if w.n.alive(w.t) {
		w.timer.Reset(w.t.keepAlive)
		return
	}
	w.cancel(errServerSilent)
}

// end stops watching, once.
func (w *watchdog) end() {
	if w.ended.CompareAndSwap(false, true) {
		w.timer.Stop()
		w.cancel(nil)
	}
}

// failure returns errServerSilent, naming the node, for a call the watchdog
// cut, else err.
func (w *watchdog) failure(err error) error {
	if context.Cause(w.ctx) == errServerSilent {
		return &opError{msg: errServerSilent.Error() + ": " + w.n.probeURL, errs: []error{errServerSilent}}
	}
	return err
}

// watchedBody ends its call's watchdog when the body is read to its end or
// closed.
type watchedBody struct {
	io.ReadCloser
	w *watchdog
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		b.w.end()
	case err != nil:
		err = b.w.failure(err)
	}
	return n, err
}

func (b *watchedBody) Close() error {
	err := b.ReadCloser.Close()
	b.w.end()
	return err
}

// plaintextRefused reports whether resp, an HTTP/1.0 400 to a plaintext
// request, is net/http's TLS server refusing plaintext; if not, resp's body
// is left readable from its start.
func plaintextRefused(resp *http.Response) bool {
	head := make([]byte, len(plaintextRefusedText))
	n, _ := io.ReadFull(resp.Body, head)
	if string(head[:n]) == plaintextRefusedText {
		_ = resp.Body.Close()
		return true
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head[:n]), resp.Body), resp.Body}
	return false
}
