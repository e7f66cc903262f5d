package httpapi

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/peerpb/peerpbconnect"
	"github.com/ticketd/ticketd/server/security"
)

// Node is the lock service as the HTTP side sees it: the facts that only
// the lock service knows and the probes report.
type Node interface {
	// ReadyChecks evaluates the lock service's readiness conditions, in
	// the order /readyz lists them (after the "raft" check, which comes
	// from the health status). Safe to call from any goroutine.
	ReadyChecks() []Check
}

// Config is what New builds a Server from.
type Config struct {
	// Node is the lock service, asked for its readiness (probes.go).
	Node Node
	// LockService and ClusterService implement the API's two services.
	LockService    ticketv1connect.LockServiceHandler
	ClusterService ticketv1connect.ClusterServiceHandler
	// PeerService, if set, is mounted too: the calls only other members
	// make (the node checks their certificates itself). It is not listed
	// for reflection nor health: it is no part of the public API.
	PeerService peerpbconnect.PeerServiceHandler
	// Config is the node's configuration: the API's and the metrics
	// listener's TLS files, limits.*, cors_allowed_origins and
	// listen_metrics_addr are read from it.
	Config config.Config
	// Metrics is the outermost interceptor of every call (the node's RPC
	// counters and latencies).
	Metrics connect.Interceptor
	// Auth authenticates every caller and authorizes every call (its
	// interceptor runs innermost, after the RPC log).
	Auth *security.Authenticator
	// Registry is what /metrics serves.
	Registry *prometheus.Registry
	// Workers runs the unary calls over HTTP/2 (workerpool.go); the
	// Server closes it once the API has shut down.
	Workers *WorkerPool
	// Log is the node's logger: the HTTP servers' errors, the RPC log,
	// handler panics and certificate reloads go to loggers named from it.
	Log *zap.Logger
	// Life bounds the certificate reloaders: they watch their files
	// until it ends.
	Life context.Context
}

// Server is a node's HTTP side: the client API's http.Server (its
// handler, TLS, limits and connection cap), the metrics listener, gRPC
// health and the probes. Build it with New, serve with Serve and
// ServeMetrics, stop with Close. Safe for concurrent use.
type Server struct {
	node           Node
	api            *http.Server
	apiCert        *security.Reloader // nil: plaintext h2c API
	limiter        *connLimiter
	metrics        *metricsListener
	metricsHandler http.Handler // the node's /metrics
	health         *grpchealth.StaticChecker
	auth           *security.Authenticator
	workers        *WorkerPool
	served         atomic.Bool
	closeOnce      sync.Once
	closeErr       error
}

// New loads the API's and the metrics listener's certificates (watched
// for change, and SIGHUP, until c.Life ends) and builds both HTTP servers;
// it listens on nothing (Serve, ServeMetrics). Errors: a certificate that
// cannot be loaded (security.NewReloader).
func New(c Config) (*Server, error) {
	l := c.Config.Limits
	s := &Server{
		node:           c.Node,
		limiter:        newConnLimiter(l.MaxConnections, ms(l.ReadHeaderTimeoutMS)),
		metricsHandler: promhttp.HandlerFor(c.Registry, promhttp.HandlerOpts{Registry: c.Registry}),
		health:         grpchealth.NewStaticChecker(ticketv1connect.LockServiceName, ticketv1connect.ClusterServiceName),
		auth:           c.Auth,
		workers:        c.Workers,
	}
	log := c.Log.Named("security")
	var err error
	if files := c.Config.ClientTLS(); files.Enabled() {
		if s.apiCert, err = security.NewReloader(files, log); err != nil {
			return nil, err
		}
		go s.apiCert.Watch(c.Life, security.DefaultPollInterval)
	}
	var metricsCert *security.Reloader
	if files := c.Config.MetricsTLS(); files.Enabled() {
		if metricsCert, err = security.NewReloader(files, log); err != nil {
			return nil, err
		}
		go metricsCert.Watch(c.Life, security.DefaultPollInterval)
	}
	s.api = s.newAPIServer(c)
	s.metrics = s.newMetricsListener(metricsCert, l, c.Log.Named("metrics"))
	return s, nil
}

// Auth is the Authenticator of the API (Config.Auth): the lock service
// asks it about principals, ownership and quotas. Nil on a nil Server.
func (s *Server) Auth() *security.Authenticator {
	if s == nil {
		return nil
	}
	return s.auth
}

// Workers is the pool that runs the unary calls over HTTP/2; the node also
// runs its detached proposals on it (workerpool.go).
func (s *Server) Workers() *WorkerPool { return s.workers }

// APICert is the API's certificate (cert_file, reloaded), nil when the
// API serves plaintext h2c. A follower presents it as its client
// certificate when it forwards to the leader.
func (s *Server) APICert() *security.Reloader { return s.apiCert }

// Fail turns health NOT_SERVING, for both services and the server as a
// whole, at once and for good: the node's Raft has stopped (fail-stop), so
// load balancers stop sending it traffic. Safe to call from any goroutine.
func (s *Server) Fail() {
	s.health.SetStatus(ticketv1connect.LockServiceName, grpchealth.StatusNotServing)
	s.health.SetStatus(ticketv1connect.ClusterServiceName, grpchealth.StatusNotServing)
	s.health.SetStatus("", grpchealth.StatusNotServing)
}

// Close shuts the HTTP side down around the lock service's own shutdown,
// once: health turns NOT_SERVING for both services; drain runs (the node
// stops taking work and hands its leadership over); in-flight requests
// finish, up to ctx's deadline, after which the open connections are
// closed; the workers and the metrics listener stop; then release runs
// (the node closes its backend). Every call returns release's error.
func (s *Server) Close(ctx context.Context, drain func(), release func() error) error {
	s.closeOnce.Do(func() {
		s.health.SetStatus(ticketv1connect.LockServiceName, grpchealth.StatusNotServing)
		s.health.SetStatus(ticketv1connect.ClusterServiceName, grpchealth.StatusNotServing)
		drain()
		if err := s.api.Shutdown(ctx); err != nil {
			_ = s.api.Close()
		}
		s.workers.close()
		_ = s.metrics.srv.Close()
		s.closeErr = release()
	})
	return s.closeErr
}

// ms is a config value in milliseconds as a time.Duration.
func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
