package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"

	"github.com/ticketd/ticketd/core"
)

// Sentinel errors of package config. Compare with errors.Is.
var (
	// ErrInvalid: a configuration value is missing, malformed or out of range.
	ErrInvalid = errors.New("config: invalid")
)

// EnvPrefix prefixes every environment variable ticketd reads.
const EnvPrefix = "TICKETD_"

// Backend names accepted in Config.Backend.
const (
	BackendHashicorp = "hashicorp"
	BackendEtcd      = "etcd"
)

// Raft log stores accepted in Raft.LogStore (backends.LogStores: the
// server config does not import the backends).
const (
	LogStoreBadger = "badger"
	LogStoreWAL    = "wal"
)

// Config is one ticketd node's configuration. Keys (YAML) are the koanf tags;
// nested keys join with ".", so lease.min_ms is `lease: {min_ms: ...}` in
// YAML, TICKETD_LEASE_MIN_MS in the environment and --lease-min-ms as a flag.
type Config struct {
	// ID is this node's stable, cluster-unique id (key "id").
	ID string `koanf:"id"`
	// APIAddr is the host:port the client API listens on and that other nodes
	// and clients dial (key "api_addr").
	APIAddr string `koanf:"api_addr"`
	// RaftAddr is the host:port of peer (Raft) traffic (key "raft_addr").
	RaftAddr string `koanf:"raft_addr"`
	// DataDir holds the node's badger database and snapshots (key "data_dir").
	DataDir string `koanf:"data_dir"`
	// Backend is the consensus engine: "hashicorp" or "etcd" (key "backend").
	Backend string `koanf:"backend"`
	// Bootstrap lists the voters of a new cluster, this node included (key
	// "bootstrap"). It is used only when DataDir holds no Raft state. When both
	// Bootstrap and Join are empty the node bootstraps a one-node cluster.
	Bootstrap []Peer `koanf:"bootstrap"`
	// Join is the client API address (host:port) of a running member; a node
	// with no Raft state asks it to add this node (AddMember) at start (key "join").
	Join string `koanf:"join"`
	// ForceNewCluster starts this node, after quorum loss, as a one-member
	// cluster from its own data (key "force_new_cluster"; etcd's
	// --force-new-cluster, backends.Config.ForceNewCluster): every lock and
	// the token counter survive, new members then join with empty data
	// dirs. Set it for one start only (docs/operations.md).
	ForceNewCluster bool `koanf:"force_new_cluster"`
	// AcceptMissingWatermark starts this node although its data dir holds a
	// Raft log but no usable watermark file (missing, empty or unreadable),
	// which it otherwise refuses (key "accept_missing_watermark", flag
	// --accept-missing-watermark; backends.Config.AcceptMissingWatermark):
	// a fresh watermark is written at the log's end and the decision is
	// logged at warn level. Set it for one start only, and only for a log
	// known to be complete (docs/operations.md).
	AcceptMissingWatermark bool `koanf:"accept_missing_watermark"`
	// BootstrapProbeWaitMS is how long, in milliseconds, a node about to
	// bootstrap an empty data dir waits for the other bootstrap members to
	// say whether it already took part in their cluster (key
	// "bootstrap_probe_wait_ms"; 0: the default, 3000; docs/operations.md,
	// replacing a member whose data is gone). Members of a new cluster
	// starting together wait it out once; it cannot be switched off.
	BootstrapProbeWaitMS int64 `koanf:"bootstrap_probe_wait_ms"`
	// Lease bounds the lease_ms that Acquire accepts.
	Lease Lease `koanf:"lease"`
	// Limits bounds the lock table and the wait queues.
	Limits Limits `koanf:"limits"`
	// Raft tunes the consensus backend.
	Raft Raft `koanf:"raft"`
	// Log configures logging.
	Log Log `koanf:"log"`

	// CertFile and KeyFile are the PEM certificate and key of the client API
	// (keys "cert_file", "key_file"; etcd's names). With CertFile set the API
	// serves TLS only (HTTP/2 by ALPN and HTTP/1.1); without it, plaintext
	// h2c. The files are reloaded on SIGHUP and when they change.
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
	// TrustedCAFile is the PEM bundle of CAs that client certificates are
	// verified against (key "trusted_ca_file").
	TrustedCAFile string `koanf:"trusted_ca_file"`
	// ClientCertAuth requires every API client to present a certificate
	// signed by TrustedCAFile (key "client_cert_auth"; etcd's name).
	ClientCertAuth bool `koanf:"client_cert_auth"`
	// ClientCRLFile is a certificate revocation list (PEM or DER; several
	// PEM blocks allowed) signed by a CA of TrustedCAFile (key
	// "client_crl_file"; etcd's --client-crl-file). A client certificate
	// it lists is refused at the TLS handshake. Reloaded with the
	// certificates.
	ClientCRLFile string `koanf:"client_crl_file"`
	// PeerCertFile, PeerKeyFile and PeerTrustedCAFile turn on mutual TLS 1.3
	// for peer traffic (Raft and follower-to-leader forwarding): both sides
	// present a certificate verified against PeerTrustedCAFile (keys
	// "peer_cert_file", "peer_key_file", "peer_trusted_ca_file").
	PeerCertFile      string `koanf:"peer_cert_file"`
	PeerKeyFile       string `koanf:"peer_key_file"`
	PeerTrustedCAFile string `koanf:"peer_trusted_ca_file"`
	// PeerCRLFile is a revocation list signed by a CA of PeerTrustedCAFile
	// (key "peer_crl_file"; etcd's --peer-crl-file): a peer certificate it
	// lists is refused at the handshake, accepting and dialing.
	PeerCRLFile string `koanf:"peer_crl_file"`
	// Insecure allows a non-loopback api_addr or raft_addr without TLS (key
	// "insecure"). Without it such a node refuses to start (CockroachDB's rule).
	Insecure bool `koanf:"insecure"`
	// AuthPolicyFile is the authorization policy (YAML,
	// docs/security.md#policy-file; key
	// "auth_policy_file"). Set: every API request must be authenticated and
	// allowed by it (read, lock, admin per key prefix); reloaded on SIGHUP.
	// Empty: authorization off.
	AuthPolicyFile string `koanf:"auth_policy_file"`
	// AuthTokensFile lists bearer tokens as SHA-256 digests bound to
	// principals (YAML; key "auth_tokens_file"); reloaded on SIGHUP.
	AuthTokensFile string `koanf:"auth_tokens_file"`
	// CORSAllowedOrigins lists the browser origins (scheme://host[:port], or
	// "*") allowed to call the API cross-origin with Connect or gRPC-Web (key
	// "cors_allowed_origins", comma-separated as a flag). Empty: CORS off.
	CORSAllowedOrigins []string `koanf:"cors_allowed_origins"`
	// ListenMetricsAddr, when set, serves /metrics on this host:port instead
	// of the API port, and /livez and /readyz there too, without client
	// certificates (key "listen_metrics_addr"; etcd's --listen-metrics-urls):
	// load balancers and Prometheus reach them when the API port requires
	// a client certificate.
	ListenMetricsAddr string `koanf:"listen_metrics_addr"`
	// MetricsPrincipalLabels adds a principal label to the per-principal
	// quota metrics (key "metrics_principal_labels"). Off by default: one
	// series per principal is unbounded cardinality for Prometheus, and
	// principal names may be sensitive.
	MetricsPrincipalLabels bool `koanf:"metrics_principal_labels"`
	// MetricsCertFile and MetricsKeyFile make listen_metrics_addr serve TLS
	// with this certificate (keys "metrics_cert_file", "metrics_key_file"),
	// never asking for a client certificate; without them it is plain HTTP.
	MetricsCertFile string `koanf:"metrics_cert_file"`
	MetricsKeyFile  string `koanf:"metrics_key_file"`
}

// Peer is one bootstrap member.
type Peer struct {
	ID       string `koanf:"id"`
	RaftAddr string `koanf:"raft_addr"`
	APIAddr  string `koanf:"api_addr"`
}

// Lease bounds lease lengths, in milliseconds: MinMS ≤ lease_ms ≤ MaxMS,
// and lock-delays: 0 ≤ lock_delay_ms ≤ MaxLockDelayMS.
type Lease struct {
	MinMS int64 `koanf:"min_ms"`
	MaxMS int64 `koanf:"max_ms"`
	// MaxLockDelayMS is the largest AcquireRequest.lock_delay_ms accepted,
	// in milliseconds (Chubby lock-delay; Consul caps its own at 60 s);
	// default 60000. 0 disables lock-delay (every non-zero value is refused).
	MaxLockDelayMS int64 `koanf:"max_lock_delay_ms"`
}

// Limits caps resources; 0 means no limit.
type Limits struct {
	// MaxLocks is the most locks the table may hold (ResourceExhausted beyond).
	MaxLocks int `koanf:"max_locks"`
	// MaxWaitersPerKey is the most Acquire requests waiting on one key.
	MaxWaitersPerKey int `koanf:"max_waiters_per_key"`
	// MaxSessions is the most sessions open at once (key
	// "limits.max_sessions", default 100000): CreateSession beyond it is
	// ResourceExhausted. Sessions are replicated state, like locks.
	MaxSessions int `koanf:"max_sessions"`
	// MaxLocksPerSession is the most locks held under one session, grants
	// in flight under it included (key
	// "limits.max_locks_per_session", default 1000): an Acquire under a
	// session that holds that many is ResourceExhausted, refused before
	// anything is proposed. It bounds the one entry that ends a session
	// (its apply, and the one watch event per holder it makes), which
	// otherwise stalls the cluster and every watcher for a session of very
	// many locks. WatchBufferEvents must be at least this, so that a
	// session's end fits a watcher's buffer. 0: no cap (and no such check).
	MaxLocksPerSession int `koanf:"max_locks_per_session"`
	// MaxSessionsPerPrincipal is the most sessions one principal may have
	// open at once, creates in flight included (docs/design.md#limits-and-quotas; key
	// "limits.max_sessions_per_principal", default 1000): CreateSession
	// beyond it is ResourceExhausted, so that one principal cannot fill
	// MaxSessions for everyone. It applies only with authorization on
	// (auth_policy_file); with it off every client is one anonymous
	// principal and only MaxSessions applies. 0: no per-principal cap.
	MaxSessionsPerPrincipal int `koanf:"max_sessions_per_principal"`
	// MaxConnections is the most client API connections open at once; a new
	// connection beyond it makes the oldest idle one (no request in flight),
	// or one still silent after a grace period, close; when there is none, the
	// new connection is refused (0: no cap). Busy connections are never closed.
	MaxConnections int `koanf:"max_connections"`
	// MaxConcurrentStreams is the most concurrent HTTP/2 streams (requests)
	// per client connection (default 250, golang.org/x/net/http2's own
	// default: each stream may hold a request body being read for up to
	// BodyReadTimeoutMS, so this bounds what one connection can pin; SDK
	// clients keep far fewer in flight, and a client that needs more opens
	// another connection).
	MaxConcurrentStreams int `koanf:"max_concurrent_streams"`
	// ReadHeaderTimeoutMS bounds reading a request's headers, and a TLS
	// handshake, in milliseconds.
	ReadHeaderTimeoutMS int64 `koanf:"read_header_timeout_ms"`
	// BodyReadTimeoutMS bounds reading a request's body (HTTP/1.1 and HTTP/2), in milliseconds
	// (a body trickled slower is cut). Waiting for a lock is not reading.
	BodyReadTimeoutMS int64 `koanf:"body_read_timeout_ms"`
	// IdleTimeoutMS closes a keep-alive connection idle this long, in
	// milliseconds, and ends a KeepAliveStream on which nothing arrives
	// for as long.
	IdleTimeoutMS int64 `koanf:"idle_timeout_ms"`
	// StreamWriteTimeoutMS bounds the writing of each message of a stream
	// the API sends (Watch, Snapshot, gRPC health's Watch; key
	// "limits.stream_write_timeout_ms", default 30000), in milliseconds,
	// from its first byte: a stream whose client stops reading is reset
	// (HTTP/2 RST_STREAM; the connection's other streams go on) and its
	// handler returns. It is per message, not per stream: a watch idle
	// for hours is never cut. An HTTP/2 connection on which no byte can be
	// written for as long is closed, and so is an HTTP/1.1 connection whose
	// response to a unary call is not written within it of its first byte.
	// 0: no bound.
	StreamWriteTimeoutMS int64 `koanf:"stream_write_timeout_ms"`
	// MaxHeaderBytes bounds a request's headers, in bytes.
	MaxHeaderBytes int `koanf:"max_header_bytes"`
	// WatchHistoryEntries is the most watch events a node retains for
	// resuming watchers (at least 1); older start indexes get OutOfRange.
	WatchHistoryEntries int `koanf:"watch_history_entries"`
	// WatchHistoryBytes bounds the retained watch events' memory, in bytes
	// (at least 1).
	WatchHistoryBytes int64 `koanf:"watch_history_bytes"`
	// MaxWatchers is the most Watch streams open at once on a node (0: no cap).
	MaxWatchers int `koanf:"max_watchers"`
	// WatchBufferEvents is each watcher's buffer, in events (at least 1); a
	// watcher whose buffer fills is ended with ResourceExhausted.
	WatchBufferEvents int `koanf:"watch_buffer_events"`
}

// Raft tunes the backend; zero values take the backend's defaults.
type Raft struct {
	// SnapshotThreshold is how many applied entries trigger a snapshot and
	// log compaction, at least (backends.Config.SnapshotThreshold: a big
	// table also waits for as much log as its snapshot).
	SnapshotThreshold uint64 `koanf:"snapshot_threshold"`
	// HeartbeatMS is the leader's heartbeat period in milliseconds.
	HeartbeatMS int64 `koanf:"heartbeat_ms"`
	// ElectionTimeoutMS is a follower's election timeout in milliseconds.
	ElectionTimeoutMS int64 `koanf:"election_timeout_ms"`
	// MaxMessageBytes bounds one message read from a peer, in bytes; a larger
	// declared length is refused before allocation (0: the backend's default).
	MaxMessageBytes int `koanf:"max_message_bytes"`
	// LogStore is the Raft log store (key "raft.log_store", flag
	// --raft-log-store): "wal", the backend's own write-ahead log
	// (hashicorp/raft-wal for hashicorp, etcd's storage/wal for etcd), or
	// "badger". Empty (the default) means the store the data dir was
	// written with, else "wal" (backends.ResolveLogStore), so a data dir
	// made with badger keeps it. A data dir
	// records its store, and a node refuses one written by another;
	// moving between stores is a snapshot and `ticketd restore`
	// (docs/operations.md).
	LogStore string `koanf:"log_store"`
}

// Log configures the zap logger.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `koanf:"level"`
	// Format is json or console.
	Format string `koanf:"format"`
}

// DefaultConfig returns the configuration of a lone node n1 on 127.0.0.1
// (API :7001, Raft :7101, data under data/n1, hashicorp backend).
func DefaultConfig() Config {
	return Config{
		ID:       "n1",
		APIAddr:  "127.0.0.1:7001",
		RaftAddr: "127.0.0.1:7101",
		DataDir:  "data/n1",
		Backend:  BackendHashicorp,
		Lease:    Lease{MinMS: 100, MaxMS: 600_000, MaxLockDelayMS: 60_000},
		Limits: Limits{MaxLocks: 1_000_000, MaxWaitersPerKey: 1024, MaxSessions: 100_000, MaxLocksPerSession: 1000,
			MaxSessionsPerPrincipal: 1000, MaxConnections: 4096, MaxConcurrentStreams: 250,
			ReadHeaderTimeoutMS: 10_000, BodyReadTimeoutMS: 30_000, IdleTimeoutMS: 120_000, StreamWriteTimeoutMS: 30_000,
			MaxHeaderBytes:      64 << 10,
			WatchHistoryEntries: 10_000, WatchHistoryBytes: 16 << 20, MaxWatchers: 10_000, WatchBufferEvents: 1024},
		Raft: Raft{SnapshotThreshold: 8192},
		Log:  Log{Level: "info", Format: "json"},
	}
}

// keys is every configuration key with its flag usage text and its value in
// a Config (the default shown by --help).
var keys = []struct {
	key, usage string
	get        func(c *Config) any
}{
	{"id", "node id, unique in the cluster", func(c *Config) any { return c.ID }},
	{"api_addr", "client API host:port (Connect, gRPC, gRPC-Web; HTTP/1.1 and h2c)", func(c *Config) any { return c.APIAddr }},
	{"raft_addr", "peer (Raft) host:port", func(c *Config) any { return c.RaftAddr }},
	{"data_dir", "directory of this node's database and snapshots", func(c *Config) any { return c.DataDir }},
	{"backend", "consensus backend: hashicorp or etcd", func(c *Config) any { return c.Backend }},
	{"bootstrap", "voters of a new cluster: id=raft_addr/api_addr,... (this node included)", func(c *Config) any { return FormatPeers(c.Bootstrap) }},
	{"join", "API host:port of a running member to join through on first start", func(c *Config) any { return c.Join }},
	{"force_new_cluster", "after quorum loss: start as a one-member cluster from this node's data (one start only)", func(c *Config) any { return c.ForceNewCluster }},
	{"bootstrap_probe_wait_ms", "how long an empty node waits for the other bootstrap members before it bootstraps, in ms (0: 3000)", func(c *Config) any { return c.BootstrapProbeWaitMS }},
	{"accept_missing_watermark", "start although the data dir holds a raft log but no usable watermark file (logged; one start only)", func(c *Config) any { return c.AcceptMissingWatermark }},
	{"lease.min_ms", "smallest lease_ms accepted, in milliseconds", func(c *Config) any { return c.Lease.MinMS }},
	{"lease.max_ms", "largest lease_ms accepted, in milliseconds", func(c *Config) any { return c.Lease.MaxMS }},
	{"lease.max_lock_delay_ms", "largest lock_delay_ms accepted, in milliseconds (0: lock-delay off)", func(c *Config) any { return c.Lease.MaxLockDelayMS }},
	{"limits.max_locks", "most locks held at once (0: no limit)", func(c *Config) any { return c.Limits.MaxLocks }},
	{"limits.max_waiters_per_key", "most Acquire requests waiting on one key (0: no limit)", func(c *Config) any { return c.Limits.MaxWaitersPerKey }},
	{"limits.max_sessions", "most sessions open at once (0: no limit)", func(c *Config) any { return c.Limits.MaxSessions }},
	{"limits.max_locks_per_session", "most locks held under one session, at most limits.watch_buffer_events (0: no limit)", func(c *Config) any { return c.Limits.MaxLocksPerSession }},
	{"limits.max_sessions_per_principal", "most sessions one principal may have open at once, with authorization on (0: no limit)", func(c *Config) any { return c.Limits.MaxSessionsPerPrincipal }},
	{"raft.snapshot_threshold", "applied entries between snapshots", func(c *Config) any { return c.Raft.SnapshotThreshold }},
	{"raft.heartbeat_ms", "leader heartbeat period in milliseconds (0: backend default)", func(c *Config) any { return c.Raft.HeartbeatMS }},
	{"raft.election_timeout_ms", "election timeout in milliseconds (0: backend default)", func(c *Config) any { return c.Raft.ElectionTimeoutMS }},
	{"limits.max_connections", "most client API connections open at once; beyond it idle ones are closed (0: no cap)", func(c *Config) any { return c.Limits.MaxConnections }},
	{"limits.max_concurrent_streams", "most concurrent HTTP/2 streams per client connection", func(c *Config) any { return c.Limits.MaxConcurrentStreams }},
	{"limits.read_header_timeout_ms", "time to read request headers or finish a TLS handshake, in milliseconds", func(c *Config) any { return c.Limits.ReadHeaderTimeoutMS }},
	{"limits.body_read_timeout_ms", "time to read a request body (HTTP/1.1 and HTTP/2), in milliseconds", func(c *Config) any { return c.Limits.BodyReadTimeoutMS }},
	{"limits.idle_timeout_ms", "keep-alive connections idle this long are closed, and KeepAliveStream streams that receive nothing for as long are ended, in milliseconds", func(c *Config) any { return c.Limits.IdleTimeoutMS }},
	{"limits.stream_write_timeout_ms", "time to write one message of a stream (Watch, Snapshot) to its client, in milliseconds; past it the stream is reset (0: no bound)", func(c *Config) any { return c.Limits.StreamWriteTimeoutMS }},
	{"limits.watch_history_entries", "most watch events retained for resuming watchers", func(c *Config) any { return c.Limits.WatchHistoryEntries }},
	{"limits.watch_history_bytes", "memory bound of the retained watch events, in bytes", func(c *Config) any { return c.Limits.WatchHistoryBytes }},
	{"limits.max_watchers", "most Watch streams open at once on a node (0: no cap)", func(c *Config) any { return c.Limits.MaxWatchers }},
	{"limits.watch_buffer_events", "events buffered per watcher before it is ended as too slow", func(c *Config) any { return c.Limits.WatchBufferEvents }},
	{"limits.max_header_bytes", "largest request header block, in bytes", func(c *Config) any { return c.Limits.MaxHeaderBytes }},
	{"raft.log_store", "raft log store: wal (the backend's own write-ahead log) or badger; empty: the store the data dir was written with, else wal; a data dir refuses another store", func(c *Config) any { return c.Raft.LogStore }},
	{"raft.max_message_bytes", "largest message read from a peer, in bytes (0: backend default)", func(c *Config) any { return c.Raft.MaxMessageBytes }},
	{"cert_file", "client API TLS certificate (PEM); without it the API is plaintext h2c", func(c *Config) any { return c.CertFile }},
	{"key_file", "client API TLS private key (PEM)", func(c *Config) any { return c.KeyFile }},
	{"trusted_ca_file", "CA bundle (PEM) that client certificates are verified against", func(c *Config) any { return c.TrustedCAFile }},
	{"client_cert_auth", "require a client certificate signed by trusted_ca_file", func(c *Config) any { return c.ClientCertAuth }},
	{"client_crl_file", "revocation list (PEM or DER) signed by trusted_ca_file: client certificates it lists are refused", func(c *Config) any { return c.ClientCRLFile }},
	{"peer_cert_file", "peer TLS certificate (PEM): mutual TLS 1.3 for Raft traffic and forwarding", func(c *Config) any { return c.PeerCertFile }},
	{"peer_key_file", "peer TLS private key (PEM)", func(c *Config) any { return c.PeerKeyFile }},
	{"peer_trusted_ca_file", "CA bundle (PEM) that peer certificates are verified against", func(c *Config) any { return c.PeerTrustedCAFile }},
	{"peer_crl_file", "revocation list (PEM or DER) signed by peer_trusted_ca_file: peer certificates it lists are refused", func(c *Config) any { return c.PeerCRLFile }},
	{"insecure", "allow a non-loopback api_addr or raft_addr without TLS", func(c *Config) any { return c.Insecure }},
	{"auth_policy_file", "authorization policy (YAML: rules of principal, prefix, allow read|lock|admin); empty: authorization off", func(c *Config) any { return c.AuthPolicyFile }},
	{"auth_tokens_file", "bearer tokens (YAML: tokens of principal and sha256 digest of the token)", func(c *Config) any { return c.AuthTokensFile }},
	{"cors_allowed_origins", "browser origins allowed to call the API cross-origin, comma-separated (empty: CORS off)", func(c *Config) any { return strings.Join(c.CORSAllowedOrigins, ",") }},
	{"listen_metrics_addr", "serve /metrics, /livez and /readyz on this host:port without client certificates (/metrics leaves the API port)", func(c *Config) any { return c.ListenMetricsAddr }},
	{"metrics_principal_labels", "label the quota metrics with the principal (one series per principal)", func(c *Config) any { return c.MetricsPrincipalLabels }},
	{"metrics_cert_file", "TLS certificate (PEM) of listen_metrics_addr; without it plain HTTP", func(c *Config) any { return c.MetricsCertFile }},
	{"metrics_key_file", "TLS private key (PEM) of listen_metrics_addr", func(c *Config) any { return c.MetricsKeyFile }},
	{"log.level", "log level: debug, info, warn, error", func(c *Config) any { return c.Log.Level }},
	{"log.format", "log format: json or console", func(c *Config) any { return c.Log.Format }},
}

// EnvName returns the environment variable of key ("lease.min_ms" → TICKETD_LEASE_MIN_MS).
func EnvName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// FlagName returns the flag of key ("lease.min_ms" → lease-min-ms).
func FlagName(key string) string {
	return strings.NewReplacer(".", "-", "_", "-").Replace(key)
}

// Keys returns every configuration key, sorted.
func Keys() []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.key)
	}
	sort.Strings(out)
	return out
}

// RegisterFlags adds one flag per configuration key to fs (FlagName(key)),
// with DefaultConfig's values shown as defaults. Only flags the user set
// override the file and the environment.
func RegisterFlags(fs *pflag.FlagSet) {
	d := DefaultConfig()
	for _, kk := range keys {
		switch v := kk.get(&d).(type) {
		case int64:
			fs.Int64(FlagName(kk.key), v, kk.usage)
		case int:
			fs.Int(FlagName(kk.key), v, kk.usage)
		case uint64:
			fs.Uint64(FlagName(kk.key), v, kk.usage)
		case bool:
			fs.Bool(FlagName(kk.key), v, kk.usage)
		default:
			fs.String(FlagName(kk.key), fmt.Sprint(v), kk.usage)
		}
	}
}

// Load builds a Config from, lowest precedence first: DefaultConfig, the YAML
// file at path (skipped when path is empty), the TICKETD_* variables of
// environ (os.Environ() when nil), and the flags of fs that were set on the
// command line (fs may be nil). It does not Validate. Errors wrap ErrInvalid.
func Load(path string, environ []string, fs *pflag.FlagSet) (Config, error) {
	k := koanf.New(".")
	if path != "" {
		if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
			return Config{}, fmt.Errorf("%w: read %s: %v", ErrInvalid, path, err)
		}
	}
	envKeys := map[string]string{}
	flagKeys := map[string]string{}
	for _, kk := range keys {
		envKeys[EnvName(kk.key)] = kk.key
		flagKeys[FlagName(kk.key)] = kk.key
	}
	var parseErr error
	convert := func(key, value string) (string, any) {
		if key == "cors_allowed_origins" {
			return key, splitList(value)
		}
		if key != "bootstrap" {
			return key, value
		}
		peers, err := ParsePeers(value)
		if err != nil && parseErr == nil {
			parseErr = err
		}
		return key, peers
	}
	if environ == nil {
		environ = os.Environ()
	}
	err := k.Load(env.Provider(".", env.Opt{
		Prefix:      EnvPrefix,
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(name, value string) (string, any) {
			key, ok := envKeys[name]
			if !ok {
				return "", nil // TICKETD_CONFIG and unknown names are not keys
			}
			return convert(key, value)
		},
	}), nil)
	if err != nil {
		return Config{}, fmt.Errorf("%w: environment: %v", ErrInvalid, err)
	}
	if fs != nil {
		err := k.Load(posflag.ProviderWithFlag(fs, ".", nil, func(f *pflag.Flag) (string, any) {
			key, ok := flagKeys[f.Name]
			if !ok || !f.Changed {
				return "", nil
			}
			return convert(key, f.Value.String())
		}), nil)
		if err != nil {
			return Config{}, fmt.Errorf("%w: flags: %v", ErrInvalid, err)
		}
	}
	if parseErr != nil {
		return Config{}, parseErr
	}
	c := DefaultConfig()
	if err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return c, nil
}

// ParsePeers parses the bootstrap list form "id=raft_addr/api_addr,..." into
// maps keyed like Peer's fields. An empty string is an empty list.
func ParsePeers(s string) ([]map[string]any, error) {
	out := []map[string]any{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addrs, ok1 := strings.Cut(part, "=")
		raftAddr, apiAddr, ok2 := strings.Cut(addrs, "/")
		if !ok1 || !ok2 || id == "" || raftAddr == "" || apiAddr == "" {
			return nil, fmt.Errorf("%w: bootstrap peer %q is not id=raft_addr/api_addr", ErrInvalid, part)
		}
		out = append(out, map[string]any{"id": id, "raft_addr": raftAddr, "api_addr": apiAddr})
	}
	return out, nil
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	out := []string{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// FormatPeers is the inverse of ParsePeers.
func FormatPeers(peers []Peer) string {
	parts := make([]string, 0, len(peers))
	for _, p := range peers {
		parts = append(parts, p.ID+"="+p.RaftAddr+"/"+p.APIAddr)
	}
	return strings.Join(parts, ",")
}

// Validate reports the first invalid field, wrapped in ErrInvalid.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
	}
	if c.ID == "" {
		return bad("id is empty")
	}
	for name, addr := range map[string]string{"api_addr": c.APIAddr, "raft_addr": c.RaftAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return bad("%s %q is not host:port", name, addr)
		}
	}
	if c.DataDir == "" {
		return bad("data_dir is empty")
	}
	if c.Backend != BackendHashicorp && c.Backend != BackendEtcd {
		return bad("backend %q is not %s or %s", c.Backend, BackendHashicorp, BackendEtcd)
	}
	if c.Raft.LogStore != "" && c.Raft.LogStore != LogStoreBadger && c.Raft.LogStore != LogStoreWAL {
		return bad("raft.log_store %q is not %s or %s (or empty: the data dir's store, else %s)", c.Raft.LogStore, LogStoreWAL, LogStoreBadger, LogStoreWAL)
	}
	if c.BootstrapProbeWaitMS < 0 || c.BootstrapProbeWaitMS > 60_000 {
		return bad("bootstrap_probe_wait_ms %d is outside 0..60000", c.BootstrapProbeWaitMS)
	}
	if len(c.Bootstrap) > 0 && c.Join != "" {
		return bad("bootstrap and join are exclusive: bootstrap starts a new cluster, join enters a running one")
	}
	if c.Join != "" {
		if _, _, err := net.SplitHostPort(c.Join); err != nil {
			return bad("join %q is not host:port", c.Join)
		}
	}
	if len(c.Bootstrap) > 0 {
		seen := map[string]bool{}
		self := false
		for _, p := range c.Bootstrap {
			if p.ID == "" || p.RaftAddr == "" || p.APIAddr == "" {
				return bad("bootstrap peer %+v lacks id, raft_addr or api_addr", p)
			}
			if seen[p.ID] {
				return bad("bootstrap peer id %q twice", p.ID)
			}
			seen[p.ID] = true
			if p.ID == c.ID {
				self = true
				if p.RaftAddr != c.RaftAddr || p.APIAddr != c.APIAddr {
					return bad("bootstrap entry of this node %q has addresses %s/%s, not raft_addr/api_addr %s/%s",
						p.ID, p.RaftAddr, p.APIAddr, c.RaftAddr, c.APIAddr)
				}
			}
		}
		if !self {
			return bad("bootstrap does not include this node %q", c.ID)
		}
	}
	if c.Lease.MinMS < 1 || c.Lease.MaxMS < c.Lease.MinMS {
		return bad("lease bounds [%d, %d] ms: need 1 ≤ min_ms ≤ max_ms", c.Lease.MinMS, c.Lease.MaxMS)
	}
	if c.Lease.MaxLockDelayMS < 0 {
		return bad("lease.max_lock_delay_ms %d is negative", c.Lease.MaxLockDelayMS)
	}
	if c.Limits.MaxLocks < 0 || c.Limits.MaxWaitersPerKey < 0 || c.Limits.MaxSessions < 0 || c.Limits.MaxLocksPerSession < 0 ||
		c.Limits.MaxSessionsPerPrincipal < 0 {
		return bad("negative limit")
	}
	if c.Limits.MaxConnections < 0 || c.Limits.MaxConcurrentStreams < 0 || c.Limits.ReadHeaderTimeoutMS < 0 ||
		c.Limits.BodyReadTimeoutMS < 0 || c.Limits.IdleTimeoutMS < 0 || c.Limits.StreamWriteTimeoutMS < 0 || c.Limits.MaxHeaderBytes < 0 ||
		c.Raft.MaxMessageBytes < 0 {
		return bad("negative limit")
	}
	if c.Limits.WatchHistoryEntries < 1 || c.Limits.WatchHistoryBytes < 1 || c.Limits.WatchBufferEvents < 1 || c.Limits.MaxWatchers < 0 {
		return bad("watch limits: history entries, history bytes and buffer events must be at least 1, max_watchers at least 0")
	}
	if c.Limits.MaxLocksPerSession > c.Limits.WatchBufferEvents {
		return bad("limits.watch_buffer_events %d is below limits.max_locks_per_session %d: a session's end makes one watch event per lock in one entry, "+
			"which must fit a watcher's buffer (raise the buffer or lower the per-session cap)", c.Limits.WatchBufferEvents, c.Limits.MaxLocksPerSession)
	}
	if err := c.validateTLS(); err != nil {
		return err
	}
	if c.ListenMetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.ListenMetricsAddr); err != nil {
			return bad("listen_metrics_addr %q is not host:port", c.ListenMetricsAddr)
		}
	}
	if c.Raft.HeartbeatMS < 0 || c.Raft.ElectionTimeoutMS < 0 {
		return bad("negative raft timing")
	}
	if c.Raft.HeartbeatMS > 0 && c.Raft.ElectionTimeoutMS > 0 && c.Raft.ElectionTimeoutMS < 2*c.Raft.HeartbeatMS {
		return bad("raft.election_timeout_ms %d must be at least twice raft.heartbeat_ms %d", c.Raft.ElectionTimeoutMS, c.Raft.HeartbeatMS)
	}
	if _, err := zapcore.ParseLevel(c.Log.Level); err != nil {
		return bad("log.level %q", c.Log.Level)
	}
	if c.Log.Format != "json" && c.Log.Format != "console" {
		return bad("log.format %q is not json or console", c.Log.Format)
	}
	return nil
}

// Members returns the bootstrap voters as core members: the listed peers, or
// this node alone when neither Bootstrap nor Join is set (a one-node cluster).
// A joining node returns none: it waits to be added.
func (c Config) Members() []core.Member {
	if c.Join != "" {
		return nil
	}
	if len(c.Bootstrap) == 0 {
		return []core.Member{{ID: c.ID, RaftAddr: c.RaftAddr, APIAddr: c.APIAddr, Voter: true}}
	}
	out := make([]core.Member, 0, len(c.Bootstrap))
	for _, p := range c.Bootstrap {
		out = append(out, core.Member{ID: p.ID, RaftAddr: p.RaftAddr, APIAddr: p.APIAddr, Voter: true})
	}
	return out
}
