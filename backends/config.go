package backends

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/core"
)

// Config is what every backend's New takes. Fields are shared by all backends
// so that switching `backend:` in ticketd's config changes nothing else.
type Config struct {
	// ID is this node's stable id; it must be unique in the cluster.
	ID string
	// RaftAddr is the host:port other nodes dial for peer traffic (advertised).
	RaftAddr string
	// BindAddr is the host:port to listen on for peer traffic; defaults to RaftAddr.
	BindAddr string
	// DataDir holds this node's Raft log, stable state and snapshots;
	// created if missing.
	DataDir string
	// LogStore is the Raft log store: LogStoreBadger or LogStoreWAL (see
	// there); empty means the store dataDir was written with, else
	// DefaultLogStore (ResolveLogStore). A data dir records the store
	// that wrote it (ClaimLogStore) and New refuses it with another one
	// (ErrWrongLogStore); moving between stores is a snapshot and a
	// Restore with the new store.
	LogStore string
	// Bootstrap lists the initial voters (including this node) of a new cluster.
	// It is used only when DataDir holds no Raft state; a node with empty
	// Bootstrap and no state waits to be added by the leader (join).
	Bootstrap []core.Member
	// BeforeBootstrap, if set, is called by New once it has found that
	// DataDir holds no Raft state and Bootstrap is set, just before it
	// writes Bootstrap's configuration; a non-nil error stops New, which
	// returns it wrapped and leaves the data dir without Raft state. The
	// server asks the other bootstrap members there whether this member
	// already took part in their cluster (etcd's "member has already been
	// bootstrapped"; docs/design.md#storage-and-recovery). Called once,
	// from New's goroutine; it may block (bounded by the caller).
	BeforeBootstrap func() error
	// StateMachine is the lock table this node applies committed entries to. Required.
	StateMachine *core.StateMachine
	// OnApply, if set, is called after every applied entry, in log order, from
	// the backend's apply goroutine. It must not block for long and must not call
	// Propose synchronously.
	OnApply func(index uint64, cmd core.Command, res core.Result)
	// OnRestore, if set, is called each time this node's state machine is
	// replaced by a snapshot: one installed from the leader because this
	// node lagged behind a compaction (Raft thesis §5.4.2, InstallSnapshot),
	// and the node's own latest snapshot restored while New opens the data
	// dir. index is the state machine's AppliedIndex after the restore; the
	// entries up to it were never passed to OnApply on this node, so any
	// state derived from OnApply (lease deadlines, watch history) must be
	// rebuilt from the state machine. It is called after the state machine
	// is restored and before the next OnApply, from the goroutine that
	// calls OnApply (or New's); it must not block for long and must not
	// call Propose synchronously.
	OnRestore func(index uint64)
	// OnLeaderChange, if set, is called on every leadership change seen by this
	// node, in order, from one backend goroutine. IsLeader=true is delivered only
	// after this node's barrier entry of the new term is applied.
	OnLeaderChange func(core.LeaderEvent)
	// OnFatal, if set, is called once when this node's Raft can no longer go
	// on (an apply error that would fork the state, a storage failure such as
	// a full disk, a panicked Raft loop, a damaged log). After it the backend
	// refuses every Propose and ReadIndex with core.ErrStopped; the caller is
	// expected to report NOT_SERVING and exit non-zero (fail-stop: never
	// half-alive). Called from a backend goroutine; it must not block.
	OnFatal func(error)
	// SnapshotThreshold is how many applied entries trigger a snapshot and log
	// compaction, at least: both backends also wait until the log since the
	// last snapshot is as big as that snapshot (SnapshotDue). Default 8192.
	SnapshotThreshold uint64
	// TrailingLogs is how many entries stay in the log after compaction, so a
	// slightly lagging follower catches up without a snapshot. Default 10240.
	TrailingLogs uint64
	// HeartbeatInterval is the leader's heartbeat period. Default 40ms.
	HeartbeatInterval time.Duration
	// ElectionTimeout is the follower's timeout before it starts an election
	// (randomised up to 2x by the library). Default 400ms: the failover
	// target (kill -9 of the leader to the next acknowledged write
	// in under 1 s, median) measured 0.81 s (hashicorp) and 0.59 s (etcd)
	// with it, against 2.3 s and 1.6 s with etcd's own 1 s; pre-vote and
	// check-quorum keep a slow follower from deposing a healthy leader, and
	// the 256-client bench runs saw no leader change at it on 2 cores.
	ElectionTimeout time.Duration
	// Logger receives the backend's logs; nil means zap.NewNop().
	Logger *zap.Logger
	// PeerTLS, if set, secures every peer connection of this node (Raft
	// traffic of both backends) with mutual TLS 1.3; nil keeps peer traffic
	// plaintext (safe on loopback only). It must hold:
	//   - Certificates (or GetCertificate/GetClientCertificate): this node's
	//     certificate and key, signed by the peer CA, valid for both server and
	//     client auth (ExtKeyUsageServerAuth and ExtKeyUsageClientAuth), with
	//     the host of RaftAddr among its SANs;
	//   - ClientCAs and RootCAs: the peer CA pool (usually the same pool);
	//   - ClientAuth: tls.RequireAndVerifyClientCert.
	// The backend uses it as is to accept connections, and a clone to dial
	// (ServerName set to the dialled host). MinVersion is raised to TLS 1.3
	// on both sides. A peer with no certificate, or one from another CA, is
	// refused at the handshake and logged (etcd --peer-client-cert-auth,
	// Consul verify_incoming); so is a certificate whose CN is not the id
	// of a current member, and a member's certificate is refused from the
	// moment its removal applies (backends/internal/peergate). Validate refuses a PeerTLS with no certificate,
	// no CA pool or a ClientAuth weaker than RequireAndVerifyClientCert.
	// The backend never modifies the value given.
	PeerTLS *tls.Config
	// MaxMessageBytes bounds, in bytes, every length read from a peer socket
	// (a Raft message, a snapshot chunk, a frame): a declared length above it
	// is refused before any allocation and the connection is closed. Zero
	// means DefaultMaxMessageBytes (64 MiB); Validate accepts
	// [MinMaxMessageBytes, MaxMaxMessageBytes].
	MaxMessageBytes int
	// MaxPeerConns caps the peer connections this node has accepted and
	// not yet closed, in total; MaxPeerConnsPerIP those from one remote IP
	// (a peer opens a few: hashicorp one pipeline, one heartbeat and a
	// small pool; etcd one HTTP/2 connection). Past a cap a newcomer is
	// refused (closed at once, counted as PeerObserver kind "refused",
	// logged at most once a second) unless a connection that never
	// completed its TLS handshake or first request can be closed to make
	// room; an established peer is never shed (package
	// backends/internal/peerlimit, after the client API's cap). Zero means
	// DefaultMaxPeerConns (256) and DefaultMaxPeerConnsPerIP (32); a
	// negative value disables the cap.
	MaxPeerConns      int
	MaxPeerConnsPerIP int
	// PeerIdleTimeout closes an accepted peer connection that has sent
	// nothing for that long: hashicorp, no byte of a new request
	// (a follower's heartbeat connection gets one every ElectionTimeout/10
	// and its pipeline one every HeartbeatInterval/2); etcd, an HTTP/2
	// connection with no stream, or a message stream with no byte (the
	// leader's heartbeats and the followers' answers arrive every
	// HeartbeatInterval). The TLS handshake of an accepted connection is
	// bounded by it too. Zero means 25 × ElectionTimeout (10 s at the
	// default 400 ms), at least one second.
	PeerIdleTimeout time.Duration
	// Observer, if set, receives the timings of log appends and snapshots
	// (see Observer). Nil: none.
	Observer Observer
	// ForceNewCluster, when set, makes New rewrite this node's existing
	// Raft state into that of a new one-member cluster before starting:
	// every entry in its log is applied (committed or not, as etcd's
	// --force-new-cluster and hashicorp's RecoverCluster do), and a
	// snapshot of the result whose configuration lists this node alone
	// replaces the log, at an index above every index the old cluster
	// used. The lock table and the token counter carry over; new members
	// then join with empty data dirs (AddVoter). It is for quorum loss
	// only: the other old members must never rejoin with their old data.
	// Leave it set for one start only: each start with it forgets the
	// members added since (etcd says the same of its flag). New fails
	// with ErrNoState when the data dir holds no Raft state.
	ForceNewCluster bool
	// AcceptMissingWatermark, when set, lets New start on a data dir whose
	// stores hold Raft state (entries, a term or vote, a snapshot) although
	// its watermark file is missing, empty or unreadable: a fresh mark is
	// written at the log's end and a warn-level audit line logged. Unset,
	// New refuses such a data dir with an error wrapping
	// watermark.ErrMissing that says how to recover, because the check of
	// a log shortened by damaged storage needs the mark (see
	// backends/internal/watermark). Leave it set for one start only.
	AcceptMissingWatermark bool
	// DropMessage is a fault-injection hook for tests (nil in production): when
	// it returns true, a message from node `from` to node `to` is dropped by the
	// sender's transport, as a network partition would drop it.
	DropMessage func(from, to string) bool
}

// PeerLearner is implemented by a backend whose joining node must be told
// the current members before it can answer the leader: both backends, over
// mutual TLS, to know whose certificates to accept while their
// configuration is empty (peergate); the etcd backend also for their peer
// addresses, since its node in no configuration yet never takes an address
// from a peer's request headers (otherwise a peer could claim to be the
// leader at its own address and receive the joiner's replies). The members
// must come from replicated membership through a channel the operator
// trusts: the server passes the members of the AddMember answer it got
// from the member named by --join (over the API, TLS-verified when TLS is
// on); a test harness passes the leader's Status().Members. On a node
// already in a configuration it changes nothing: addresses then come only
// from committed ConfChanges and the leader's snapshots. Safe for
// concurrent use; errors: core.ErrStopped, ctx.Err().
type PeerLearner interface {
	LearnPeers(ctx context.Context, members []core.Member) error
}

// Bounds of Config.MaxMessageBytes, in bytes.
const (
	// DefaultMaxMessageBytes is the MaxMessageBytes used when it is zero:
	// 64 MiB, larger than any batch of lock commands and than the default
	// snapshot chunk.
	DefaultMaxMessageBytes = 64 << 20
	// MinMaxMessageBytes is the smallest accepted MaxMessageBytes (1 MiB):
	// below it a snapshot of a modest lock table could not be sent.
	MinMaxMessageBytes = 1 << 20
	// MaxMaxMessageBytes is the largest accepted MaxMessageBytes (1 GiB).
	MaxMaxMessageBytes = 1 << 30
)

// Defaults of Config.MaxPeerConns and Config.MaxPeerConnsPerIP, in connections.
const (
	// DefaultMaxPeerConns: far above what a cluster of a few nodes opens
	// (a handful per peer), far below the process's file limit.
	DefaultMaxPeerConns = 256
	// DefaultMaxPeerConnsPerIP: room for several peers behind one address
	// (a loopback cluster) with a handful of connections each.
	DefaultMaxPeerConnsPerIP = 32
)

// Sentinel errors of package backends (Config.Validate, PrepareDataDir, Restore, ForceNewCluster).
var (
	// ErrInvalidConfig: a Config field is missing or out of range.
	ErrInvalidConfig = errors.New("backends: invalid config")
	// ErrInsecureDataDir: the data dir is writable by group or others, so
	// another local user could rewrite the Raft log or snapshots; the node
	// refuses to start on it (PrepareDataDir). The error is a
	// *DataDirModeError naming the dir and its mode.
	ErrInsecureDataDir = errors.New("backends: data dir is writable by group or others")
	// ErrDataDirInUse: Restore was pointed at a data dir that already holds
	// Raft state; restoring over it would mix two histories. Move it away
	// first (etcdutl snapshot restore refuses the same way).
	ErrDataDirInUse = errors.New("backends: data dir already holds raft state")
	// ErrWrongBackend: the data dir was written by the other backend;
	// opening it would misread its log.
	ErrWrongBackend = errors.New("backends: data dir belongs to another backend")
	// ErrNoState: ForceNewCluster was set for a data dir with no Raft state
	// (nothing to recover; bootstrap or Restore a new cluster instead).
	ErrNoState = errors.New("backends: no raft state to recover")
)

// DefaultConfig returns a Config with every optional field at its default.
func DefaultConfig() Config {
	return Config{
		SnapshotThreshold: 8192,
		TrailingLogs:      10240,
		HeartbeatInterval: 40 * time.Millisecond,
		ElectionTimeout:   400 * time.Millisecond,
	}
}

// WithDefaults returns c with zero optional fields replaced by DefaultConfig's,
// and an empty LogStore by the store DataDir was written with, else
// DefaultLogStore (ResolveLogStore: it reads the data dir).
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	if c.BindAddr == "" {
		c.BindAddr = c.RaftAddr
	}
	c.LogStore = ResolveLogStore(c.DataDir, c.LogStore)
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = d.SnapshotThreshold
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = d.TrailingLogs
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = d.HeartbeatInterval
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = d.ElectionTimeout
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxPeerConns == 0 {
		c.MaxPeerConns = DefaultMaxPeerConns
	}
	if c.MaxPeerConnsPerIP == 0 {
		c.MaxPeerConnsPerIP = DefaultMaxPeerConnsPerIP
	}
	if c.PeerIdleTimeout == 0 {
		c.PeerIdleTimeout = max(25*c.ElectionTimeout, time.Second)
	}
	return c
}

// Validate reports the first missing or inconsistent field, wrapped in ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case c.ID == "":
		return fmt.Errorf("%w: empty ID", ErrInvalidConfig)
	case c.RaftAddr == "":
		return fmt.Errorf("%w: empty RaftAddr", ErrInvalidConfig)
	case c.DataDir == "":
		return fmt.Errorf("%w: empty DataDir", ErrInvalidConfig)
	case c.StateMachine == nil:
		return fmt.Errorf("%w: nil StateMachine", ErrInvalidConfig)
	case c.LogStore != "" && !slices.Contains(LogStores(), c.LogStore):
		return fmt.Errorf("%w: LogStore %q is not %s", ErrInvalidConfig, c.LogStore, strings.Join(LogStores(), " or "))
	case c.HeartbeatInterval < 0 || c.ElectionTimeout < 0:
		return fmt.Errorf("%w: negative timeout", ErrInvalidConfig)
	case c.ElectionTimeout != 0 && c.HeartbeatInterval != 0 && c.ElectionTimeout < 2*c.HeartbeatInterval:
		return fmt.Errorf("%w: ElectionTimeout %v must be at least twice HeartbeatInterval %v", ErrInvalidConfig, c.ElectionTimeout, c.HeartbeatInterval)
	case c.PeerIdleTimeout < 0:
		return fmt.Errorf("%w: negative PeerIdleTimeout", ErrInvalidConfig)
	case c.MaxMessageBytes != 0 && (c.MaxMessageBytes < MinMaxMessageBytes || c.MaxMessageBytes > MaxMaxMessageBytes):
		return fmt.Errorf("%w: MaxMessageBytes %d outside [%d, %d] bytes", ErrInvalidConfig, c.MaxMessageBytes, MinMaxMessageBytes, MaxMaxMessageBytes)
	}
	if err := validatePeerTLS(c.PeerTLS); err != nil {
		return err
	}
	if len(c.Bootstrap) > 0 {
		found := false
		for _, m := range c.Bootstrap {
			if m.ID == "" || m.RaftAddr == "" {
				return fmt.Errorf("%w: bootstrap member with empty ID or RaftAddr", ErrInvalidConfig)
			}
			found = found || m.ID == c.ID
		}
		if !found {
			return fmt.Errorf("%w: Bootstrap does not include this node %q", ErrInvalidConfig, c.ID)
		}
	}
	return nil
}
