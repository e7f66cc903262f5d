package server

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/lessor"
	"github.com/ticketd/ticketd/server/security"
	"github.com/ticketd/ticketd/server/waitq"
	"github.com/ticketd/ticketd/server/watch"
)

// Sentinel errors of package server. Compare with errors.Is; errmap.go turns
// them into connect codes. Their texts carry no package prefix: clients see
// them as error messages after the code, without a "server:" prefix.
var (
	// ErrNotFound: no lock is held on the key with the given token (Release).
	ErrNotFound = errors.New("lease expired or released")
	// ErrTooManyLocks: the lock table holds limits.max_locks locks.
	ErrTooManyLocks = errors.New("the lock table is full")
	// ErrNoMember: the request names a member id that is not in the configuration.
	ErrNoMember = errors.New("no such member")
	// ErrUnsafeMembership: a membership change was refused because the
	// cluster could not reach quorum with the members that are up afterwards,
	// or the new member's API address does not answer as that member
	// (etcd --strict-reconfig-check), or the new member applies fewer
	// command versions than the leader (commandversion.go).
	ErrUnsafeMembership = errors.New("unsafe membership change")
	// ErrOutcomeUnknown: a proposal made on the client's behalf, detached
	// from its context, timed out inside the server: it may or may not have
	// taken effect. Unavailable: the client retries with the same owner,
	// which returns the grant if it did (Acquire is idempotent per owner,
	// docs/semantics.md#acquire). Never
	// DeadlineExceeded, which says the client's own waiting ran out.
	ErrOutcomeUnknown = errors.New("the proposal timed out inside the server; outcome unknown, retry with the same owner")
	// ErrLockEnding: an idempotent retry of Acquire found its owner's lock
	// being expired, and going round for a fresh grant kept meeting that
	// (rare). Unavailable: retry with the same owner.
	ErrLockEnding = errors.New("the lock is being expired; retry with the same owner")
	// ErrReplaying: a local (stale) read was refused because this node has
	// not yet applied the commit index it had recorded before it restarted:
	// its table is older than what it served before (docs/design.md#reads).
	// Unavailable: retry, at the leader or later.
	ErrReplaying = errors.New("this node is replaying its log after a restart")
	// ErrSessionNotFound: a request named a session that does not exist:
	// never opened, ended (closed or expired), or opened by another principal
	// (core.OutcomeSessionNotFound). Returned as a *SessionNotFoundError
	// naming it. NotFound: open a new session.
	ErrSessionNotFound = errors.New("session not found")
	// ErrHeldUnderSession: a Renew named a lock held under a session, whose
	// lease is its session's (docs/design.md#sessions). FailedPrecondition:
	// keep the session alive (KeepAlive) instead.
	ErrHeldUnderSession = errors.New("the lock is held under a session: keep the session alive")
	// ErrTooManySessions: limits.max_sessions sessions are open.
	// ResourceExhausted: close sessions, or retry later.
	ErrTooManySessions = errors.New("too many open sessions")
	// ErrSessionFull: an Acquire under a session that already holds (or is
	// acquiring) limits.max_locks_per_session locks; refused before anything
	// is proposed. ResourceExhausted: release locks of the session, or use
	// another session.
	ErrSessionFull = errors.New("the session holds too many locks")
	// ErrTooManyStreams: a KeepAliveStream beyond this node's cap of open
	// streams, or its principal's (keepalivestream.go). ResourceExhausted:
	// close streams, or keep alive with the unary KeepAlive.
	ErrTooManyStreams = errors.New("too many keep-alive streams")
)

// SessionNotFoundError is the ErrSessionNotFound of session Session.
// errors.Is(err, ErrSessionNotFound) is true for it.
type SessionNotFoundError struct {
	// Session is the session id the request gave.
	Session uint64
}

// Error implements error.
func (e *SessionNotFoundError) Error() string {
	return fmt.Sprintf("session %d not found (ended, expired, or another principal's)", e.Session)
}

// Is reports whether target is ErrSessionNotFound.
func (e *SessionNotFoundError) Is(target error) bool { return target == ErrSessionNotFound }

// InvalidFieldHeader is the response header (a trailer in gRPC) in which an
// InvalidArgument error names the request field at fault, when one is:
// "key", "owner", "lease_ms", "lock_delay_ms", "token", "mode", "limit",
// "session" or "ttl_ms" (core.FieldError).
// Clients use it to speak in their own terms (ticketctl says --ttl for
// lease_ms); the SDK reads it with sdk.InvalidField. docs/api.md lists it.
const InvalidFieldHeader = "Ticketd-Invalid-Field"

// codeOf is the single mapping from ticketd errors to connect codes, one
// meaning per code (docs/api.md#errors lists the same
// codes). "Retryable" means the same request may simply be sent again
// (Acquire with the same owner); the others need a changed request or a
// decision by the caller.
//
//   - InvalidArgument: bad input (empty or oversize key, lease_ms outside the
//     configured bounds, token 0, bad member fields); nothing changed. Not
//     retryable.
//   - AlreadyExists: the key is held and the request did not wait. Retry
//     later or wait.
//   - NotFound: no lock is held on the key with that token (never granted,
//     released, or its lease ran out). Not retryable: the lock is lost. Also
//     an Acquire under a session that is unknown, ended or another
//     principal's (ErrSessionNotFound): open a new session.
//   - Unavailable: not the leader, no leader yet, or shutting down; retry,
//     at the leader named in the LeaderHint detail when there is one. Also an
//     internal proposal timeout (ErrOutcomeUnknown: retry with the same
//     owner), a retry whose lock kept ending (ErrLockEnding), and a local read
//     on a node still replaying its log (ErrReplaying). Retryable.
//   - DeadlineExceeded: the request's deadline passed (waiting ran out).
//     Retryable with the same owner.
//   - ResourceExhausted: the lock table or the key's wait queue is full,
//     limits.max_sessions sessions are open (ErrTooManySessions), the
//     session holds limits.max_locks_per_session locks (ErrSessionFull), a
//     node's or a principal's cap of keep-alive streams (ErrTooManyStreams); a
//     watcher too slow to keep up, or too many watchers; the principal is
//     at its quota of locks, sessions, watchers or waiters
//     (security.ErrQuotaExceeded, a *security.QuotaError naming it).
//     Retryable after a back-off (a Watch resumes from its last index).
//   - OutOfRange: a Watch start_index older than the node's retained
//     history, or a watcher on a node whose history was dropped (it installed
//     a snapshot from the leader); the WatchOutOfRange detail names the
//     oldest index kept. Not retryable as is: relist (include_existing) and
//     watch again from there.
//   - Aborted: an Acquire without wait that would join the key's holders
//     (a shared request beside readers) while requests that wait are queued
//     ahead of it (a writer: writer preference; waitq.ErrQueued). It claims
//     nothing about the lock table, and nothing changed. Retry later, or
//     wait.
//   - Canceled: the client went away.
//   - FailedPrecondition: a membership change that would leave the cluster
//     without a reachable quorum, names an API address that does not
//     answer as that member, or adds a member of an older binary
//     (ErrUnsafeMembership); nothing changed. Not retryable as is: bring
//     members up, fix the address, or upgrade the member. Also an
//     Acquire whose limit differs from the key's while it has holders or
//     waiters (waitq.ErrLimitMismatch), with a ticket.v1.LimitMismatch
//     detail carrying the key's current limit: retry with that limit. Also
//     a Renew of a lock held under a session (ErrHeldUnderSession): keep
//     the session alive instead. Also an Acquire whose owner already holds
//     the key, or is acquiring it, with another mode, limit or session
//     (waitq.ErrOwnerConflict): it is not a retry of that request, and is
//     never answered with that holder's token; use another owner id.
//   - Unauthenticated: authorization is on and the request has no valid
//     identity (no client certificate or bearer token, an unknown token, a
//     principal header from a non-member). Not retryable without credentials.
//   - PermissionDenied: the principal's policy does not allow the request,
//     or it renews or releases another principal's lock; nothing changed.
//     Not retryable. These two come from security.ToConnect (the
//     authorization interceptor and mayTouch), not from codeOf: the
//     security layer maps its own sentinels.
//   - Internal: anything else (a bug; logged at Warn). Retry elsewhere.
func codeOf(err error) connect.Code {
	switch {
	case errors.Is(err, core.ErrInvalidArgument), errors.Is(err, ErrNoMember):
		return connect.CodeInvalidArgument
	case errors.Is(err, ErrOutcomeUnknown), errors.Is(err, ErrLockEnding), errors.Is(err, ErrReplaying):
		return connect.CodeUnavailable
	case errors.Is(err, waitq.ErrHeld):
		return connect.CodeAlreadyExists
	case errors.Is(err, waitq.ErrQueued):
		return connect.CodeAborted
	case errors.Is(err, ErrNotFound), errors.Is(err, lessor.ErrNotHeld), errors.Is(err, lessor.ErrExpired),
		errors.Is(err, ErrSessionNotFound):
		return connect.CodeNotFound
	case errors.Is(err, core.ErrNotLeader), errors.Is(err, core.ErrStopped),
		errors.Is(err, waitq.ErrClosed), errors.Is(err, lessor.ErrNotPrimary), errors.Is(err, lessor.ErrClosed):
		return connect.CodeUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return connect.CodeDeadlineExceeded
	case errors.Is(err, context.Canceled):
		return connect.CodeCanceled
	case errors.Is(err, waitq.ErrFull), errors.Is(err, ErrTooManyLocks), errors.Is(err, ErrTooManySessions), errors.Is(err, ErrSessionFull),
		errors.Is(err, ErrTooManyStreams),
		errors.Is(err, watch.ErrSlow), errors.Is(err, watch.ErrTooManyWatchers), errors.Is(err, security.ErrQuotaExceeded):
		return connect.CodeResourceExhausted
	case errors.Is(err, watch.ErrCompacted):
		return connect.CodeOutOfRange
	case errors.Is(err, watch.ErrClosed), errors.Is(err, watch.ErrCredentialsChanged):
		return connect.CodeUnavailable
	case errors.Is(err, ErrUnsafeMembership), errors.Is(err, waitq.ErrLimitMismatch), errors.Is(err, ErrHeldUnderSession),
		errors.Is(err, waitq.ErrOwnerConflict):
		return connect.CodeFailedPrecondition
	}
	return connect.CodeInternal
}

// toConnect turns err into the *connect.Error a handler returns. An error that
// already is a *connect.Error (a forwarded call's) passes through. Unavailable
// errors carry a ticket.v1.LeaderHint detail naming the leader when one other
// than this node is known, so clients retry there directly.
func (n *Node) toConnect(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	code := codeOf(err)
	out := connect.NewError(code, &publicError{err: err})
	var field *core.FieldError
	if errors.As(err, &field) {
		out.Meta().Set(InvalidFieldHeader, field.Field)
	}
	var compacted *watch.CompactedError
	if code == connect.CodeOutOfRange && errors.As(err, &compacted) {
		if d, derr := connect.NewErrorDetail(&ticketv1.WatchOutOfRange{OldestIndex: compacted.OldestIndex}); derr == nil {
			out.AddDetail(d)
		}
	}
	var mismatch *waitq.LimitMismatchError
	if code == connect.CodeFailedPrecondition && errors.As(err, &mismatch) {
		if d, derr := connect.NewErrorDetail(&ticketv1.LimitMismatch{Limit: mismatch.Limit}); derr == nil {
			out.AddDetail(d)
		}
	}
	if code != connect.CodeUnavailable {
		return out
	}
	var leader core.Member
	var nle *core.NotLeaderError
	if errors.As(err, &nle) {
		leader = nle.Leader
	}
	if leader.ID == "" {
		leader, _ = n.leaderMember()
	}
	if leader.ID == "" || leader.ID == n.cfg.ID {
		return out
	}
	if leader.APIAddr == "" {
		leader.APIAddr, _ = n.sm.MemberAPIAddr(leader.ID)
	}
	if d, derr := connect.NewErrorDetail(&ticketv1.LeaderHint{LeaderId: leader.ID, LeaderAddr: leader.APIAddr}); derr == nil {
		out.AddDetail(d)
	}
	return out
}

// publicError is the cause of the *connect.Error a handler returns: err,
// whose text is the message clients see after the code ("invalid_argument:
// lease 50ms is outside the allowed range 100ms to 10m0s"). The code already
// says what the leading core sentinel would ("ticketd: invalid argument",
// "ticketd: not leader"), so Error drops that prefix: one sentence, the code
// once. errors.Is and errors.As see err through Unwrap.
type publicError struct{ err error }

// Error implements error: err's text without a leading core sentinel.
func (e *publicError) Error() string {
	msg := e.err.Error()
	for _, s := range []error{core.ErrInvalidArgument, core.ErrStopped} {
		if rest, ok := strings.CutPrefix(msg, s.Error()+": "); ok {
			return rest
		}
	}
	return strings.TrimPrefix(msg, "ticketd: ")
}

// Unwrap returns err.
func (e *publicError) Unwrap() error { return e.err }
