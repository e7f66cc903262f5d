package core

import "fmt"

// Op names the kind of a replicated Command. It is a plain value, safe to copy
// and compare.
type Op uint8

// The replicated commands of DESIGN.md's command table. The numeric values are
// not the wire encoding (see Encode) and may be reordered freely; never persist them.
const (
	// OpNoop changes nothing; a new leader's barrier entry (Raft thesis §6.4).
	OpNoop Op = iota
	// OpGrant takes a free key for Owner with a lease of LeaseMS milliseconds.
	OpGrant
	// OpRelease deletes Key if it is held with Token.
	OpRelease
	// OpExpire deletes Key if it is held with Token; proposed only by the leader's lessor.
	OpExpire
	// OpSetMember records the client API address APIAddr of Raft member MemberID.
	OpSetMember
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
	}
	return fmt.Sprintf("op(%d)", uint8(op))
}

// Command is one lock-state change, the payload of one Raft log entry. Only the
// fields of its Op are meaningful; the others are zero (and Encode drops them).
// A Command is a plain value: copy it freely. Build one with Grant, Release,
// Expire, Noop or SetMember; the server checks request fields with
// ValidateKey, ValidateOwner, ValidateLease and ValidateToken before proposing,
// since Apply takes any Command as given.
type Command struct {
	// Op selects the command and so which of the fields below are meaningful.
	Op Op
	// Key is the lock name (Grant, Release, Expire); at most MaxKeyBytes bytes of UTF-8.
	Key string
	// LeaseMS is the lease length in milliseconds (Grant).
	LeaseMS int64
	// Owner is the client-chosen id of the requester (Grant); at most MaxOwnerBytes bytes.
	Owner string
	// Token is the fencing token of the lock to remove (Release, Expire): only
	// the holder's token removes it, so a late or duplicated command never
	// removes a lock granted since.
	Token uint64
	// MemberID and APIAddr describe a member's client API address (SetMember).
	MemberID string
	APIAddr  string
}

// Grant returns the command that takes key for owner with a lease of leaseMS
// milliseconds: granted with the next fencing token if key is free, the
// holder's lock unchanged if owner already holds it (an idempotent retry),
// rejected otherwise. It does not validate its arguments.
func Grant(key string, leaseMS int64, owner string) Command {
	return Command{Op: OpGrant, Key: key, LeaseMS: leaseMS, Owner: owner}
}

// Release returns the command that deletes key if it is held with token
// (OutcomeReleased), and otherwise changes nothing (OutcomeNotFound).
func Release(key string, token uint64) Command {
	return Command{Op: OpRelease, Key: key, Token: token}
}

// Expire returns the command that deletes key if it is held with token; only the
// leader's lessor proposes it, once the lease has run out (etcd lessor). The
// result is OutcomeExpired with Existed reporting whether a lock was removed.
func Expire(key string, token uint64) Command {
	return Command{Op: OpExpire, Key: key, Token: token}
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

// The results of applying a Command (DESIGN.md, "Replicated commands").
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
	// OutcomeExpired: an Expire applied; Existed says whether it removed a lock.
	OutcomeExpired
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
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Result is what applying one Command produced. Business outcomes such as "key
// held" are Results, never errors. A Result is a comparable plain value.
type Result struct {
	// Outcome says what happened; it decides which fields below are set.
	Outcome Outcome
	// Token is a fencing token: the granted lock's (Granted) or the current
	// holder's (GrantRejected); zero for every other outcome.
	Token uint64
	// LeaseMS is the lock's lease in milliseconds (Granted).
	LeaseMS int64
	// Existed is true when an Expire removed a lock (Expired).
	Existed bool
	// Created is true when a Grant created the lock (Granted), and false when
	// it returned the lock its owner already held (an idempotent retry). Only a
	// grant that created its lock may be released as a ghost (DESIGN.md, Leases).
	Created bool
}

// Lock is one held lock in the lock table, as Get, Range and Ascend return it
// (a copy: changing it changes nothing).
type Lock struct {
	// Key is the lock name.
	Key string
	// Token is the fencing token the lock was granted with (Chubby §2.4 sequencer).
	Token uint64
	// LeaseMS is the lease length in milliseconds; the deadline itself is not
	// replicated state (only the leader's lessor keeps deadlines).
	LeaseMS int64
	// Owner is the client-chosen id of the holder, as given in its Grant.
	Owner string
}
