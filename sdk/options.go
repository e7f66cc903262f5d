package sdk

import (
	"crypto/tls"
	"net/http"
	"time"

	"connectrpc.com/connect"
)

// Defaults of the knobs that Option changes.
const (
	// DefaultRequestTimeout bounds one attempt of a call that does not wait in
	// a queue (everything except Lock): after it the attempt is abandoned and
	// retried on another node. Renewals use the smaller of it and ttl/3.
	DefaultRequestTimeout = 5 * time.Second
	// DefaultBackoffBase is the first delay between retries of a retryable
	// failure; it doubles per retry up to DefaultBackoffMax.
	DefaultBackoffBase = 25 * time.Millisecond
	// DefaultBackoffMax caps the delay between retries: 100 ms, so the first
	// retry after a leader election (a few hundred milliseconds) is not
	// parked behind a long backoff (the failover benchmark in
	// docs/benchmarks.md measured a 1 s cap adding 0.3–0.5 s); etcd's client
	// retries every 25 ms.
	DefaultBackoffMax = 100 * time.Millisecond
	// DefaultDriftRate is the fraction of a lease's TTL kept back as a safety
	// margin for clock-rate drift between this process and the servers:
	// 0.01 (1%, 10,000 ppm) is twenty times the 500 ppm that NTP may slew a
	// disciplined clock and a hundred times a typical crystal's error.
	DefaultDriftRate = 0.01
	// DefaultMinMargin is the least safety margin, whatever the TTL: it covers
	// timer and goroutine-scheduling latency between the local deadline and
	// Done closing on a busy machine (tens of milliseconds at worst in our
	// tests on two shared cores).
	DefaultMinMargin = 50 * time.Millisecond
	// DefaultKeepAlive is how long an HTTP/2 connection may stay silent before
	// the client pings it; a node that does not answer the ping within the
	// same time (a stopped or partitioned process) has its connection closed,
	// which fails the calls waiting on it so they move to another node.
	DefaultKeepAlive = 2 * time.Second
	// DefaultSessionTTL is the lease of the client's default session (see
	// WithSessionTTL): etcd clientv3/concurrency.NewSession's default of
	// 60 s is long for a lock service whose users expect a dead client's
	// locks back within seconds; Consul's session default is 15 s.
	DefaultSessionTTL = 10 * time.Second
)

// Option changes a rarely-set knob of New, in the style of connect-go's
// ClientOption. Options apply in order; a later one wins.
type Option func(*config)

type config struct {
	grpc           bool
	httpClient     *http.Client
	connectOpts    []connect.ClientOption
	requestTimeout time.Duration
	backoffBase    time.Duration
	backoffMax     time.Duration
	driftRate      float64
	minMargin      time.Duration
	keepAlive      time.Duration
	ownerPrefix    string
	tls            *tls.Config
	bearerToken    string
	sessionTTL     time.Duration
}

func defaultConfig() config {
	return config{
		requestTimeout: DefaultRequestTimeout,
		backoffBase:    DefaultBackoffBase,
		backoffMax:     DefaultBackoffMax,
		driftRate:      DefaultDriftRate,
		minMargin:      DefaultMinMargin,
		keepAlive:      DefaultKeepAlive,
		sessionTTL:     DefaultSessionTTL,
	}
}

// WithGRPC makes the client speak the gRPC protocol instead of the default
// Connect protocol (connect.WithGRPC). Both run over HTTP/2; servers accept
// either on the same port.
func WithGRPC() Option {
	return func(c *config) { c.grpc = true }
}

// WithHTTPClient replaces the built-in HTTP client (NewHTTPClient: h2c for
// http:// endpoints, HTTP/2 over TLS for https://). Use it for TLS settings or a custom dialer.
// The client must speak HTTP/2 for gRPC; Connect works over HTTP/1.1 too,
// but a Lock waiting on HTTP/1.1 is not health-checked by pings.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *config) { c.httpClient = hc }
}

// WithTLS makes the built-in HTTP client speak HTTP/2 over TLS with cfg
// (RootCAs: the cluster's CA; Certificates: a client certificate when the
// servers run with --client-cert-auth). Endpoints given as "host:port" then
// mean https://host:port, and leader hints are followed over https only.
// Ignored by WithHTTPClient's client, which brings its own TLS settings.
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) { c.tls = cfg }
}

// WithConnectOptions adds connect-go client options (interceptors, codecs,
// compression) to every call.
func WithConnectOptions(opts ...connect.ClientOption) Option {
	return func(c *config) { c.connectOpts = append(c.connectOpts, opts...) }
}

// WithRequestTimeout sets the per-attempt timeout of calls that do not wait
// (DefaultRequestTimeout). d ≤ 0 is ignored. The whole call is still bounded
// by its ctx; this only decides when to give up on one node and try another.
func WithRequestTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.requestTimeout = d
		}
	}
}

// WithBackoff sets the exponential backoff between retries of retryable
// failures: the n-th delay is drawn uniformly from [d/2, d] with
// d = min(base·2ⁿ, max) ("equal jitter"). Non-positive values are ignored.
func WithBackoff(base, max time.Duration) Option {
	return func(c *config) {
		if base > 0 {
			c.backoffBase = base
		}
		if max > 0 {
			c.backoffMax = max
		}
	}
}

// WithSafetyMargin sets how much of each lease the client keeps back from
// the server's lower bound: the local deadline of a lease is
// sent + ttl − max(ttl·driftRate, minMargin), where sent is the local send
// time of the last acknowledged grant or renewal. driftRate must lie in
// [0, 0.5) and minMargin be ≥ 0, or the option is ignored. The defaults are
// DefaultDriftRate and DefaultMinMargin. A larger margin closes Done earlier;
// a margin below the real clock-rate difference between client and server
// could let Done close after the server has given the key to someone else.
func WithSafetyMargin(driftRate float64, minMargin time.Duration) Option {
	return func(c *config) {
		if driftRate >= 0 && driftRate < 0.5 && minMargin >= 0 {
			c.driftRate = driftRate
			c.minMargin = minMargin
		}
	}
}

// WithKeepAlive sets the HTTP/2 ping interval and ping timeout of the
// built-in HTTP client (DefaultKeepAlive). Ignored with WithHTTPClient.
func WithKeepAlive(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.keepAlive = d
		}
	}
}

// WithOwnerPrefix sets the readable prefix of the owner ids the client makes
// for its Acquire requests (default "hostname/pid"). The server shows owners
// in GetLock and ListLocks; a prefix names the application holding a key.
// The prefix is cut to 64 bytes.
func WithOwnerPrefix(prefix string) Option {
	return func(c *config) { c.ownerPrefix = prefix }
}

// WithSessionTTL sets the lease of the client's default session (whole
// milliseconds, within the servers' lease bounds; DefaultSessionTTL): the
// session that RLock, Semaphore.Acquire and Lock with ttl 0 hold their
// locks under, kept alive every ttl/3. A client that dies loses those locks
// about ttl after its last acknowledged KeepAlive. d ≤ 0 is ignored. A
// session holds at most the servers' limits.max_locks_per_session locks
// (default 1000; past it Acquire fails with ResourceExhausted): a client
// that holds more at once gives the others their own lease (WithLease) or
// sessions of their own (CreateSession, WithSession).
func WithSessionTTL(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.sessionTTL = d
		}
	}
}

// AcquireOption changes one Acquire, Lock, TryLock, RLock, TryRLock or
// Semaphore.Acquire call.
type AcquireOption func(*acquireConfig)

type acquireConfig struct {
	owner     string
	wait      bool
	lockDelay time.Duration // see WithLockDelay (lock.go)
	shared    bool          // WithShared
	limit     uint32        // WithLimit
	session   *Session      // WithSession
	sessionID uint64        // WithSessionID
	lease     time.Duration // WithLease: an own lease instead of the default session
}

// WithShared asks for a shared hold (AcquireRequest.mode MODE_SHARED): any
// number of shared holders coexist, never beside an exclusive one (the read
// side of a readers-writer lock; Curator InterProcessReadWriteLock, Chubby
// shared locks). RLock sets it.
func WithShared() AcquireOption {
	return func(c *acquireConfig) { c.shared = true }
}

// WithLimit makes the key a counting semaphore of n slots
// (AcquireRequest.limit; Curator InterProcessSemaphoreV2): up to n holders
// at once. Every acquirer of the key must give the same n while it has
// holders or waiters (else *LimitMismatchError). Semaphore sets it.
func WithLimit(n uint32) AcquireOption {
	return func(c *acquireConfig) { c.limit = n }
}

// WithSession acquires under session s (AcquireRequest.session): the lock
// takes the session's TTL as its lease, is renewed by the session's
// KeepAlive (not by Renew) and is released when the session ends. The
// Lease's Done closes when s is lost or closed.
func WithSession(s *Session) AcquireOption {
	return func(c *acquireConfig) { c.session = s }
}

// WithSessionID acquires under the session with this id, kept alive by
// someone else (ticketctl session keepalive, another process). It is for
// Acquire only, which returns a Grant: Lock, RLock and Semaphore refuse it
// with ErrInvalidArgument, since their Lease could not tell when that
// session is lost (use WithSession).
func WithSessionID(id uint64) AcquireOption {
	return func(c *acquireConfig) { c.sessionID = id }
}

// WithLease gives RLock or Semaphore.Acquire a lease of its own of ttl
// (whole milliseconds within the servers' bounds), renewed by the Lease
// every ttl/3, instead of holding the lock under the client's default
// session. Lock's ttl argument does the same for Lock.
func WithLease(ttl time.Duration) AcquireOption {
	return func(c *acquireConfig) { c.lease = ttl }
}

// WithOwner sets the owner id of the request instead of a fresh client-made
// one (at most 128 bytes). A request whose owner already holds the key gets
// that same grant back when it asks the same mode, limit and session (one of
// another kind is refused with the servers' FailedPrecondition, never given
// that holder's token): use it to retry an acquisition from another process
// (ticketctl --owner), never to share one id between different requests.
func WithOwner(owner string) AcquireOption {
	return func(c *acquireConfig) { c.owner = owner }
}

// WithWait makes Acquire wait in the key's FIFO queue on the leader until the
// key is granted or ctx ends, instead of failing with ErrLocked.
func WithWait() AcquireOption {
	return func(c *acquireConfig) { c.wait = true }
}

// ReadOption changes one GetLock or ListLocks call.
type ReadOption func(*readConfig)

type readConfig struct {
	stale bool
}

// readConfigOf applies opts.
func readConfigOf(opts []ReadOption) readConfig {
	var rc readConfig
	for _, o := range opts {
		o(&rc)
	}
	return rc
}

// WithStale lets any node answer from its local state machine, without
// contacting the leader. The answer may lag the leader by the replication
// delay, or by much more on a partitioned node.
func WithStale() ReadOption {
	return func(c *readConfig) { c.stale = true }
}
