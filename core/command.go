package core

import "fmt"

// Op names the kind of a replicated Command. It is a plain value, safe to copy
// and compare.
type Op uint8

// The replicated commands (docs/design.md#replicated-commands; core/doc.go
// lists their outcomes). The numeric values are
// not the wire encoding (see Encode) and may be reordered freely; never persist them.
const (
	// OpNoop changes nothing; a new leader's barrier entry (Raft thesis §6.4).
	OpNoop Op = iota
	// OpGrant takes a free key for Owner (and Principal) with a lease of
	// LeaseMS milliseconds and an optional lock-delay of LockDelayMS.
	OpGrant
	// OpRelease deletes Key if it is held with Token.
	OpRelease
	// OpExpire deletes Key if it is held with Token and unchanged since
	// SeenIndex (0: unconditionally); proposed only by the leader's lessor.
	OpExpire
	// OpSetMember records the client API address APIAddr of Raft member MemberID.
	OpSetMember
	// OpRenew restarts the lease of the lock held on Key with Token: its
	// ModIndex becomes the entry's index: renewals are replicated commands,
	// so every node restarts the lease from its own apply
	// (docs/design.md#leases).
	OpRenew
	// OpCreateSession opens a session with a lease of LeaseMS milliseconds
	// (etcd lease grant, Consul session create); its id is the entry's index.
	OpCreateSession
	// OpKeepAliveSession restarts the lease of session Session (etcd
	// LeaseKeepAlive, Consul session renew).
	OpKeepAliveSession
	// OpCloseSession ends session Session and releases every lock held
	// under it (etcd LeaseRevoke, Consul session destroy).
	OpCloseSession
	// OpExpireSession ends session Session, if unchanged since SeenIndex,
	// and releases every lock held under it; proposed only by the leader's
	// lessor (etcd lessor revoke on expiry, Consul session TTL).
	OpExpireSession
	// OpRenewBatch restarts, in one entry, the leases of the sessions and
	// locks in Batch: each as the KeepAliveSession or Renew of its own at
	// the entry's index would (renewbatch.go).
	OpRenewBatch
)

// String returns the lower-case name of op ("grant", "release", ...).
func (op Op) String() string {
	switch op {
	case OpNoop:
		return "noop"
	case OpGrant:
		return "grant"
	case OpRelease:
		return "release"
	case OpExpire:
		return "expire"
	case OpSetMember:
		return "set-member"
	case OpRenew:
		return "renew"
	case OpCreateSession:
		return "create-session"
	case OpKeepAliveSession:
		return "keep-alive-session"
	case OpCloseSession:
		return "close-session"
	case OpExpireSession:
		return "expire-session"
	case OpRenewBatch:
		return "renew-batch"
	}
	return fmt.Sprintf("op(%d)", uint8(op))
}

// Command is one lock-state change, the payload of one Raft log entry. Only the
// fields of its Op are meaningful; the others are zero (and Encode drops them).
// A Command is a plain, comparable value: copy it freely (the one pointer,
// Batch, is shared, read-only data, set only for a RenewBatch: compare those
// with reflect.DeepEqual). Build one with Grant (optionally WithLockDelay,
// WithPrincipal, WithMode, WithLimit, WithSession), Release, Renew, Expire,
// ExpireSeen, CreateSession, KeepAliveSession, CloseSession, ExpireSession,
// RenewBatch, Noop or SetMember; the server checks request fields with
// ValidateKey, ValidateOwner, ValidatePrincipal, ValidateLease,
// ValidateLockDelay, ValidateMode, ValidateToken and ValidateSession before
// proposing, since Apply takes any Command as given.
type Command struct {
	// Op selects the command and so which of the fields below are meaningful.
	Op Op
	// Key is the lock name (Grant, Release, Renew, Expire); at most MaxKeyBytes bytes of UTF-8.
	Key string
	// LeaseMS is the lease length in milliseconds (Grant; for CreateSession
	// the session's TTL). A Grant under a session ignores it: the lock
	// follows the session's lease.
	LeaseMS int64
	// Owner is the client-chosen id of the requester (Grant); at most MaxOwnerBytes bytes.
	Owner string
	// Token is the fencing token of the lock to remove or renew (Release,
	// Renew, Expire): only the holder's token acts on it, so a late or
	// duplicated command never touches a lock granted since.
	Token uint64
	// SeenIndex is, for an Expire, the lock's ModIndex that the leader saw
	// when it decided the lease had run out: the lock is removed only if its
	// ModIndex is still at or below it, so a Renew (or retry Grant) that
	// commits between the decision and the Expire wins. 0 means
	// unconditional (how every Expire written before ExpireSeen existed
	// replays). For an ExpireSession, the same with the session's ModIndex
	// and KeepAliveSession.
	SeenIndex uint64
	// LockDelayMS is, for a Grant, how long in milliseconds the key stays
	// ungrantable after the lock ends by Expire (not by Release); 0 for none
	// (Chubby §2.4 lock-delay, Consul session lock-delay). Kept with the lock.
	LockDelayMS int64
	// Principal is, for a Grant, the authenticated identity acquiring the
	// lock, kept with it ("" when authorization is off). A Grant by the same
	// Owner with another Principal is not a retry
	// (docs/security.md#locks-are-bound-to-their-principal). For
	// CreateSession, the identity opening the session: only a Grant with the
	// same Principal may take a lock under it.
	Principal string
	// Mode is, for a Grant, ModeExclusive (the zero value) or ModeShared
	// (Chubby shared locks, Curator InterProcessReadWriteLock's read lock).
	Mode Mode
	// Limit is, for a Grant, the key's semaphore slots (Curator
	// InterProcessSemaphoreV2, Consul semaphores): up to Limit holders at
	// once, whatever their Mode. 0 means an exclusive (or, with ModeShared,
	// a shared) lock. Every Grant of a held key must give the key's Limit.
	Limit uint32
	// Session is, for a Grant, the session to hold the lock under (0: none),
	// and for KeepAliveSession, CloseSession and ExpireSession the session
	// acted on (etcd leases, Consul sessions).
	Session uint64
	// MemberID and APIAddr describe a member's client API address (SetMember).
	MemberID string
	APIAddr  string
	// Batch is, for a RenewBatch, the sessions and locks it renews; nil
	// otherwise. Shared, read-only data.
	Batch *Renewals
}

// Grant returns the command that takes key for owner with a lease of leaseMS
// milliseconds. A key has a set of holders, each with its own fencing token,
// and, while it has any, a mode and limit given by its first Grant (a plain
// exclusive lock is the one-holder case). Applied, in this order:
//
//   - key free: a new holder with the next fencing token, ModIndex = the
//     entry's index, and the command's LockDelayMS, Principal, Mode, Limit
//     and Session; any lock-delay record of key is cleared (Result Created =
//     true).
//   - a holder of key has the same owner and the same principal: an
//     idempotent retry. The holder keeps its token, lease, lock-delay and
//     principal, but its ModIndex becomes the retry's index: the retry's
//     client measures its lease from the retry's send time, so the retry
//     restarts the lease exactly as a Renew does (Result Created = false,
//     LeaseMS the holder's).
//   - the command's Limit differs from the key's: OutcomeLimitMismatch with
//     the key's Limit; nothing changes (the server answers FailedPrecondition).
//   - the key is full (Limit holders of a semaphore; one holder of an
//     exclusive lock) or the modes mix (a shared request on an exclusive
//     lock or the other way round; a semaphore ignores Mode):
//     OutcomeGrantRejected with the oldest holder's token; nothing changes.
//   - otherwise (a shared lock, or a semaphore with a free slot): a new
//     holder beside the others, with the next fencing token.
//
// Under a Session (WithSession) the session must exist and have been opened
// by the same Principal, else OutcomeSessionNotFound; the holder's LeaseMS is
// the session's TTL and it ends with the session (etcd leases, Consul
// sessions). The Result of a shared or semaphore key (or of a session)
// carries its Mode, Limit, holder count and Session so that the server's
// waiter queue can decide without a lookup; that of a plain exclusive lock is
// what it always was.
//
// The state machine does not enforce lock-delay (Apply reads no clock): the
// leader proposes a Grant for a delayed key only after the delay has passed
// (see StateMachine.LockDelay). Grant does not validate its arguments.
func Grant(key string, leaseMS int64, owner string) Command {
	return Command{Op: OpGrant, Key: key, LeaseMS: leaseMS, Owner: owner}
}

// WithLockDelay returns a copy of the Grant c asking for a lock-delay of
// lockDelayMS milliseconds (see Command.LockDelayMS).
func (c Command) WithLockDelay(lockDelayMS int64) Command {
	c.LockDelayMS = lockDelayMS
	return c
}

// WithPrincipal returns a copy of the Grant c made on behalf of principal
// (see Command.Principal).
func (c Command) WithPrincipal(principal string) Command {
	c.Principal = principal
	return c
}

// WithMode returns a copy of the Grant c asking for mode (see Command.Mode).
func (c Command) WithMode(mode Mode) Command {
	c.Mode = mode
	return c
}

// WithLimit returns a copy of the Grant c asking for a semaphore slot of a
// key with limit holders (see Command.Limit).
func (c Command) WithLimit(limit uint32) Command {
	c.Limit = limit
	return c
}

// WithSession returns a copy of the Grant c that holds its lock under session
// (see Command.Session).
func (c Command) WithSession(session uint64) Command {
	c.Session = session
	return c
}

// Renew returns the command that restarts the lease of the lock held on key
// with token: applied, the lock's ModIndex becomes the entry's index and the
// Result is OutcomeRenewed with the lock's LeaseMS; every node restarts its
// deadline for the lock from its own apply (docs/design.md#leases). Any other
// token, or a free key, gives OutcomeNotFound and changes nothing.
func Renew(key string, token uint64) Command {
	return Command{Op: OpRenew, Key: key, Token: token}
}

// Release returns the command that deletes key if it is held with token
// (OutcomeReleased), and otherwise changes nothing (OutcomeNotFound).
func Release(key string, token uint64) Command {
	return Command{Op: OpRelease, Key: key, Token: token}
}

// Expire returns the command that deletes key if it is held with token,
// unconditionally (SeenIndex 0); only the leader's lessor proposes it, once the
// lease has run out (etcd lessor). The result is OutcomeExpired with Existed
// reporting whether a lock was removed and LockDelayMS the removed lock's
// lock-delay; a removed lock with a lock-delay leaves a LockDelay record.
// New code should prefer ExpireSeen.
func Expire(key string, token uint64) Command {
	return Command{Op: OpExpire, Key: key, Token: token}
}

// ExpireSeen returns the Expire that deletes key only if it is held with token
// and its ModIndex is at or below seenIndex, the ModIndex the leader saw when
// it decided the lease had run out. Otherwise the result is
// OutcomeExpired with Existed false: a late or duplicate expiry never removes
// a lock granted, renewed or re-granted by a retry since: commands name
// the holder they act on (docs/design.md#replicated-commands). A
// seenIndex of 0 is the unconditional Expire.
func ExpireSeen(key string, token, seenIndex uint64) Command {
	return Command{Op: OpExpire, Key: key, Token: token, SeenIndex: seenIndex}
}

// Noop returns the command that changes nothing: the barrier a new leader
// commits in its own term before serving (Raft thesis §6.4).
func Noop() Command { return Command{Op: OpNoop} }

// SetMember returns the command that records apiAddr as member id's client API
// address in the replicated member directory; an empty apiAddr removes id. Its
// result is OutcomeNoop.
func SetMember(id, apiAddr string) Command {
	return Command{Op: OpSetMember, MemberID: id, APIAddr: apiAddr}
}

// Outcome names the kind of a Result. It is a plain value, safe to copy and compare.
type Outcome uint8

// The results of applying a Command (docs/design.md#replicated-commands).
const (
	// OutcomeNoop: the entry changed nothing (Noop, SetMember, or an index at or
	// below the applied index).
	OutcomeNoop Outcome = iota
	// OutcomeGranted: Token is the holder's fencing token, LeaseMS its lease.
	OutcomeGranted
	// OutcomeGrantRejected: the key is held by another owner; Token is the holder's token.
	OutcomeGrantRejected
	// OutcomeReleased: the lock held with the given token was deleted.
	OutcomeReleased
	// OutcomeNotFound: no lock is held on the key with the given token.
	OutcomeNotFound
	// OutcomeExpired: an Expire applied; Existed says whether it removed a
	// lock, LockDelayMS that lock's lock-delay.
	OutcomeExpired
	// OutcomeRenewed: a Renew restarted the lease of the lock; LeaseMS is its
	// lease. Also a KeepAliveSession: LeaseMS is the session's TTL, Session its id.
	OutcomeRenewed
	// OutcomeLimitMismatch: a Grant gave another Limit than the key's while
	// it has holders; Limit is the key's, Token its oldest holder's, and
	// nothing changed. The server maps it to FailedPrecondition
	// (docs/api.md#shared-locks-and-semaphores).
	OutcomeLimitMismatch
	// OutcomeSessionCreated: a CreateSession opened session Session with a
	// TTL of LeaseMS milliseconds.
	OutcomeSessionCreated
	// OutcomeSessionNotFound: a Grant named a session that does not exist
	// (never created, or ended) or was opened by another principal; nothing
	// changed.
	OutcomeSessionNotFound
)

// String returns the lower-case name of o ("granted", "not-found", ...).
func (o Outcome) String() string {
	switch o {
	case OutcomeNoop:
		return "noop"
	case OutcomeGranted:
		return "granted"
	case OutcomeGrantRejected:
		return "grant-rejected"
	case OutcomeReleased:
		return "released"
	case OutcomeNotFound:
		return "not-found"
	case OutcomeExpired:
		return "expired"
	case OutcomeRenewed:
		return "renewed"
	case OutcomeLimitMismatch:
		return "limit-mismatch"
	case OutcomeSessionCreated:
		return "session-created"
	case OutcomeSessionNotFound:
		return "session-not-found"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Result is what applying one Command produced. Business outcomes such as "key
// held" are Results, never errors. A Result is a comparable plain value; the
// one pointer, Ended, is set only by a session's end (compare those field by
// field). For plain exclusive locks outside a session (the only kind before
// shared locks, semaphores and sessions, CommandVersion3) Results are exactly
// what they always were: the fields added since are zero. A RenewBatch's
// Result carries one more pointer, Batch.
type Result struct {
	// Outcome says what happened; it decides which fields below are set.
	Outcome Outcome
	// Token is a fencing token: the granted holder's (Granted) or the
	// key's oldest holder's (GrantRejected, LimitMismatch; the server reads
	// the others with StateMachine.Holders); zero for every other outcome.
	Token uint64
	// LeaseMS is the lock's lease in milliseconds (Granted, Renewed).
	LeaseMS int64
	// Existed is true when an Expire removed a lock (Expired).
	Existed bool
	// Created is true when a Grant created the lock (Granted), and false when
	// it returned the lock its owner already held (an idempotent retry). Only a
	// grant that created its lock may be released as a ghost
	// (docs/design.md#ghost-locks).
	Created bool
	// LockDelayMS is, when an Expire removed a lock (Expired, Existed), that
	// lock's lock-delay in milliseconds, so that an OnApply hook can start
	// the delay without a lookup; 0 when it had none or when other holders
	// still hold the key (no LockDelay record is made then).
	LockDelayMS int64
	// Mode is the key's mode, Limit its semaphore limit and Holders its
	// number of holders after the apply, for a Grant (any outcome but
	// SessionNotFound), Release or Expire on a shared or semaphore key;
	// all three are zero for a plain exclusive lock, whose one holder Token
	// names. A LimitMismatch always carries the key's Limit.
	Mode    Mode
	Limit   uint32
	Holders int
	// Session is the session a Grant took its lock under, or that a
	// CreateSession opened, a KeepAliveSession renewed, or a CloseSession or
	// ExpireSession ended; 0 otherwise.
	Session uint64
	// Ended is, for a CloseSession (OutcomeReleased) or an ExpireSession
	// that ended its session (OutcomeExpired, Existed), what the end
	// removed; nil otherwise. It is shared, read-only data.
	Ended *SessionEnd
	// Batch is, for a RenewBatch, the Result of each of its renewals;
	// nil otherwise. It is shared, read-only data.
	Batch *BatchResult
}

// Mode is the mode of a Grant and of a held key. The zero value is
// ModeExclusive, so every command written before modes existed keeps its
// meaning.
type Mode uint8

// The lock modes (docs/semantics.md#modes-and-limits).
const (
	// ModeExclusive: one holder at a time (or up to Limit with a semaphore).
	ModeExclusive Mode = iota
	// ModeShared: any number of shared holders together, never beside an
	// exclusive one (Chubby §2.1 shared locks; Curator
	// InterProcessReadWriteLock's read lock). Writer preference and FIFO
	// are the server's waiter queue's job, not the state machine's.
	ModeShared
)

// String returns "exclusive", "shared" or "mode(N)".
func (m Mode) String() string {
	switch m {
	case ModeExclusive:
		return "exclusive"
	case ModeShared:
		return "shared"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// Lock is one holder of a key in the lock table, as Get, Holders, Range and
// Ascend return it (a copy: changing it changes nothing). A plain exclusive
// lock has one holder; a shared key or a semaphore may have several, each
// with its own Token, all with the key's Mode and Limit.
type Lock struct {
	// Key is the lock name.
	Key string
	// Token is the fencing token the lock was granted with (Chubby §2.4 sequencer).
	Token uint64
	// LeaseMS is the lease length in milliseconds; the deadline itself is not
	// replicated state: every node counts it from its own apply of the entry
	// at ModIndex (docs/design.md#leases).
	LeaseMS int64
	// Owner is the client-chosen id of the holder, as given in its Grant.
	Owner string
	// ModIndex is the log index of the lock's last change: its creating
	// Grant, its last Renew or its last idempotent retry Grant. An Expire
	// with a SeenIndex below it does not remove the lock. 0 for a lock
	// restored from a version 1 snapshot (before ModIndex existed).
	ModIndex uint64
	// LockDelayMS is the lock-delay in milliseconds asked for by its Grant
	// (0: none); see Command.LockDelayMS.
	LockDelayMS int64
	// Principal is the authenticated identity that acquired the lock, ""
	// when authorization is off (docs/security.md#locks-are-bound-to-their-principal).
	Principal string
	// Mode and Limit are the key's (the same in every holder of a key; see
	// Command.Mode and Command.Limit).
	Mode  Mode
	Limit uint32
	// Session is the session the holder is under (0: none). Such a holder
	// follows the session's lease: its LeaseMS is the session's TTL, and the
	// lessor times the session (Session.ModIndex), not the holder.
	Session uint64
}

// LockDelay records a key held back after an Expire removed a lock that asked
// for a lock-delay (Chubby §2.4, Consul sessions). The record is replicated
// state (in snapshots); the delay's end is not: every node counts LockDelayMS
// from its own apply of the Expire at Index, on its own monotonic clock, and
// the leader proposes no Grant for Key before it has passed. The record is
// cleared when Key is next granted.
type LockDelay struct {
	// Key is the delayed lock name.
	Key string
	// LockDelayMS is the delay in milliseconds, from the removed lock.
	LockDelayMS int64
	// Index is the log index of the Expire that removed the lock.
	Index uint64
}
