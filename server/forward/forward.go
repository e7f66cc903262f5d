package forward

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
)

// Header marks a request forwarded by a follower; its value is the
// forwarding node's id. A node that receives a marked request and is not the
// leader answers Unavailable with a leader hint instead of forwarding again,
// so a request makes at most one hop and never loops during an election.
const Header = "Ticketd-Forwarded"

// LeaderHeader is set on responses to forwarded requests: the id of the
// leader that served them.
const LeaderHeader = "Ticketd-Leader"

// Config configures a Forwarder.
type Config struct {
	// Self is this node's id, sent as the Header value.
	Self string
	// DialTimeout bounds connecting to the leader; default 2s.
	DialTimeout time.Duration
	// Options are extra connect client options (interceptors in tests).
	Options []connect.ClientOption
	// TLS, when set, makes the Forwarder dial the leader's client API over
	// TLS (https; HTTP/2 by ALPN) with this config: the leader's certificate
	// is verified against its RootCAs and the config's client certificate is
	// presented. Nil: h2c (http), as a node without cert_file serves.
	TLS *tls.Config
}

// Forwarder sends requests to the leader's client API over HTTP/2, with TLS
// when Config.TLS is set and h2c otherwise, one cached connection per leader
// address. It is safe for concurrent use.
type Forwarder struct {
	cfg    Config
	client *http.Client
	tr     *http.Transport

	mu      sync.Mutex
	lock    map[string]ticketv1connect.LockServiceClient
	cluster map[string]ticketv1connect.ClusterServiceClient
}

// New returns a Forwarder. Close releases its idle connections.
func New(cfg Config) *Forwarder {
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	var p http.Protocols
	if cfg.TLS != nil {
		p.SetHTTP2(true)
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	tr := &http.Transport{
		Protocols:       &p,
		TLSClientConfig: cfg.TLS,
		DialContext:     (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		// Detect a dead leader on an idle shared connection.
		HTTP2: &http.HTTP2Config{PingTimeout: 5 * time.Second, SendPingTimeout: 10 * time.Second},
	}
	return &Forwarder{
		cfg:     cfg,
		client:  &http.Client{Transport: tr},
		tr:      tr,
		lock:    map[string]ticketv1connect.LockServiceClient{},
		cluster: map[string]ticketv1connect.ClusterServiceClient{},
	}
}

// Lock returns the LockService client of the node whose API is at addr (host:port).
func (f *Forwarder) Lock(addr string) ticketv1connect.LockServiceClient {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.lock[addr]
	if !ok {
		c = ticketv1connect.NewLockServiceClient(f.client, f.URL(addr), f.options()...)
		f.lock[addr] = c
	}
	return c
}

// Cluster returns the ClusterService client of the node whose API is at addr.
func (f *Forwarder) Cluster(addr string) ticketv1connect.ClusterServiceClient {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.cluster[addr]
	if !ok {
		c = ticketv1connect.NewClusterServiceClient(f.client, f.URL(addr), f.options()...)
		f.cluster[addr] = c
	}
	return c
}

// URL returns the base URL of the client API at addr (host:port): https://
// when the Forwarder uses TLS, http:// otherwise.
func (f *Forwarder) URL(addr string) string {
	if f.cfg.TLS != nil {
		return "https://" + addr
	}
	return "http://" + addr
}

// Config returns the Forwarder's configuration (defaults filled in).
func (f *Forwarder) Config() Config { return f.cfg }

// HTTPClient returns the HTTP client the Forwarder's clients use.
func (f *Forwarder) HTTPClient() *http.Client { return f.client }

// Close closes idle connections. The Forwarder stays usable.
func (f *Forwarder) Close() { f.tr.CloseIdleConnections() }

// Forwarded reports whether the request of a handler context was forwarded
// by another node (it carries Header).
func Forwarded(ctx context.Context) bool {
	ci, ok := connect.CallInfoForHandlerContext(ctx)
	return ok && ci.RequestHeader().Get(Header) != ""
}

// Call forwards one unary request: it marks the outgoing request with Header,
// calls fn (a method of a client from Lock or Cluster), notes the leader id
// on the handler's response headers, and returns the leader's response. An
// error from the leader comes back as a fresh *connect.Error with the same
// code, message and details (the leader's response headers are not copied).
// Transport failures reaching the leader are connect's own codes (Unavailable
// for a refused connection, DeadlineExceeded, Canceled).
func Call[Req, Res any](ctx context.Context, f *Forwarder, leaderID string, fn func(context.Context, *Req) (*Res, error), req *Req) (*Res, error) {
	out, ci := connect.NewClientContext(ctx)
	ci.RequestHeader().Set(Header, f.cfg.Self)
	res, err := fn(out, req)
	if hi, ok := connect.CallInfoForHandlerContext(ctx); ok {
		hi.ResponseHeader().Set(LeaderHeader, leaderID)
	}
	if err != nil {
		return nil, Sanitize(err)
	}
	return res, nil
}

// Sanitize turns an error a connect client returned into one fit to return
// from a handler: same code, message and details, no copied metadata.
func Sanitize(err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	out := connect.NewError(ce.Code(), errors.New(ce.Message()))
	for _, d := range ce.Details() {
		out.AddDetail(d)
	}
	return out
}
