package sdk

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// Sentinel errors of package sdk. Compare with errors.Is: the errors the
// client returns wrap one of these and, when a server answered, the
// *connect.Error it sent (reachable with errors.As).
var (
	// ErrLocked: the key is held by another owner and the request did not
	// wait (TryLock, Acquire without WithWait). Server code AlreadyExists,
	// or Aborted: a try-acquire that would join the key's holders while
	// requests that wait are queued ahead of it (a reader behind a waiting
	// writer).
	ErrLocked = errors.New("ticketd: key is locked")
	// ErrNotHeld: the server holds no lock on the key with that token; it was
	// released, expired, or granted to someone else since. Server code NotFound.
	ErrNotHeld = errors.New("ticketd: lock not held with this token")
	// ErrLeaseLost: Lease.Err once Done is closed because the lease may have
	// ended without Unlock: its local deadline passed without an acknowledged
	// renewal, or the server refused a renewal (then ErrNotHeld is wrapped too).
	ErrLeaseLost = errors.New("ticketd: lease lost")
	// ErrReleased: Lease.Err once Unlock has released the lock.
	ErrReleased = errors.New("ticketd: lease released")
	// ErrAmbiguous: a request that changes state may or may not have taken
	// effect, and the client could not find out before ctx ended (a timeout,
	// a reset connection). The error is an *AmbiguousError and also wraps the
	// ctx error. After an ambiguous Acquire the key may be held for this
	// request until its TTL runs out; the client releases such a grant in the
	// background when it can, and the server releases grants whose client has
	// gone.
	ErrAmbiguous = errors.New("ticketd: outcome unknown")
	// ErrUnavailable: no node could serve the request (no leader, nodes down
	// or unreachable) before ctx ended. Server code Unavailable; the client
	// retries it by itself and only returns it wrapped with the ctx error.
	ErrUnavailable = errors.New("ticketd: unavailable")
	// ErrInvalidArgument: the request is malformed or out of the server's
	// bounds (empty or oversized key, TTL outside the configured range, token
	// 0). Nothing changed. Server code InvalidArgument.
	ErrInvalidArgument = errors.New("ticketd: invalid argument")
	// ErrResourceExhausted: a server limit (lock-table size, queue length) was
	// reached. Nothing changed. Server code ResourceExhausted.
	ErrResourceExhausted = errors.New("ticketd: resource exhausted")
	// ErrPermissionDenied: the server's authorization policy does not allow
	// this principal the request (no lock or read permission on the key, no
	// admin permission), or the lock belongs to another principal. Nothing
	// changed. Server code PermissionDenied.
	ErrPermissionDenied = errors.New("ticketd: permission denied")
	// ErrUnauthenticated: the server has authorization on and the request
	// carried no accepted credential (no client certificate, an unknown
	// bearer token). Server code Unauthenticated.
	ErrUnauthenticated = errors.New("ticketd: unauthenticated")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("ticketd: client closed")
	// ErrSessionNotFound: the session is unknown to the servers, has ended
	// (its lease ran out, or it was closed) or belongs to another principal:
	// every lock that was held under it is gone. Server code NotFound on
	// Acquire (with a session), KeepAlive and CloseSession (etcd's
	// ErrLeaseNotFound, Consul's "invalid session").
	ErrSessionNotFound = errors.New("ticketd: session not found")
	// ErrLimitMismatch: an Acquire gave a limit other than the one every
	// holder and waiter of the key gave (a semaphore's slot count, or 0 for
	// a lock). The error is a *LimitMismatchError carrying the key's limit.
	// Nothing changed. Server code FailedPrecondition.
	ErrLimitMismatch = errors.New("ticketd: limit mismatch")
)

// LimitMismatchError is the refusal of an Acquire whose limit differs from
// the key's current one (every acquirer of a key gives the same limit while
// it has holders or waiters: docs/semantics.md#modes-and-limits).
// errors.Is(err, ErrLimitMismatch)
// is true for it; get it with errors.As to read the key's limit.
type LimitMismatchError struct {
	// Limit is the key's current limit: its semaphore's slots, or 0 when
	// the key is held as a lock (exclusive or shared).
	Limit uint32
}

// Error implements error.
func (e *LimitMismatchError) Error() string {
	return fmt.Sprintf("ticketd: limit mismatch: the key's limit is %d", e.Limit)
}

// Is reports whether target is ErrLimitMismatch.
func (e *LimitMismatchError) Is(target error) bool { return target == ErrLimitMismatch }

// limitMismatchOf returns the *LimitMismatchError of a FailedPrecondition
// answer carrying a LimitMismatch detail, or nil.
func limitMismatchOf(err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeFailedPrecondition {
		return nil
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if m, ok := v.(*ticketv1.LimitMismatch); ok {
				return &LimitMismatchError{Limit: m.GetLimit()}
			}
		}
	}
	return nil
}

// InvalidFieldHeader is the response header (a trailer in gRPC) in which a
// server's InvalidArgument error names the request field at fault: "key",
// "owner", "lease_ms", "lock_delay_ms" or "token" (docs/api.md, Errors).
const InvalidFieldHeader = "Ticketd-Invalid-Field"

// InvalidField returns the request field that a server's InvalidArgument
// answer in err names as at fault (InvalidFieldHeader), or "" when err is
// no such answer or names none. ticketctl uses it to name its own flag
// (--ttl for lease_ms).
func InvalidField(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument {
		return ""
	}
	return ce.Meta().Get(InvalidFieldHeader)
}

// AmbiguousError reports a state-changing request whose outcome is unknown.
// errors.Is(err, ErrAmbiguous) is true for it, and errors.Is also matches the
// error it wraps (context.DeadlineExceeded, context.Canceled, ...).
type AmbiguousError struct {
	// Op is the operation: "acquire" or "release".
	Op string
	// Key is the lock key of the request.
	Key string
	// Owner is the owner id the request carried; a later Acquire WithOwner of
	// the same id returns the grant if the request did take effect.
	Owner string
	// Err is why the client stopped trying (usually the ctx error, joined
	// with the last failure).
	Err error
}

// Error implements error.
func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("ticketd: %s %q (owner %q): outcome unknown: %v", e.Op, e.Key, e.Owner, e.Err)
}

// Is reports whether target is ErrAmbiguous.
func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguous }

// Unwrap returns the cause.
func (e *AmbiguousError) Unwrap() error { return e.Err }

// failure is how one attempt failed, as far as retrying is concerned.
type failure int

const (
	// failFinal: the server gave a definitive answer; do not retry.
	failFinal failure = iota
	// failNotSent: the request never reached a server (connection refused).
	failNotSent
	// failRetry: retryable, and the request may have taken effect
	// (Unavailable, timeout, reset connection).
	failRetry
)

// classify tells how an attempt's error should be handled.
func classify(err error) failure {
	if connRefused(err) {
		return failNotSent
	}
	if tlsRefused(err) {
		// A certificate the client or the server will not accept: no
		// retry can change it, so say so now instead of after the
		// call's whole timeout.
		return failFinal
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeCanceled:
		return failRetry
	case connect.CodeAborted:
		// ticketd sends Aborted only to a try-acquire that waiting
		// requests are queued ahead of (ErrLocked): final. One that no
		// ticketd sent (a proxy's) is retried.
		if connect.IsWireError(err) {
			return failFinal
		}
		return failRetry
	case connect.CodeUnknown, connect.CodeInternal:
		// A reset or half-read connection surfaces as one of these when no
		// server sent a code; a server that did send one is final.
		if connect.IsWireError(err) {
			return failFinal
		}
		return failRetry
	}
	return failFinal
}

// leaderHint returns the leader API address a node attached to its error, or "".
func leaderHint(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if derr != nil {
			continue
		}
		if h, ok := v.(*ticketv1.LeaderHint); ok && h.GetLeaderAddr() != "" {
			return h.GetLeaderAddr()
		}
	}
	return ""
}

// sentinelOf maps a connect code to this package's sentinel, or nil.
func sentinelOf(err error) error {
	switch connect.CodeOf(err) {
	case connect.CodeAlreadyExists, connect.CodeAborted:
		// Aborted: a try-acquire that waiting requests are queued ahead of
		// (a reader behind a waiting writer); for the caller, not acquired.
		return ErrLocked
	case connect.CodeNotFound:
		return ErrNotHeld
	case connect.CodeInvalidArgument:
		return ErrInvalidArgument
	case connect.CodeResourceExhausted:
		return ErrResourceExhausted
	case connect.CodeUnavailable:
		return ErrUnavailable
	case connect.CodePermissionDenied:
		return ErrPermissionDenied
	case connect.CodeUnauthenticated:
		return ErrUnauthenticated
	}
	return nil
}

// wrapErr turns an attempt's error into the error the caller sees:
// `acquire "k": already_exists: key "k" is held by another owner`. The code
// appears once (the *connect.Error's text): the sentinel it maps to is
// matched by errors.Is but not repeated in the text (docs/api.md#errors).
func wrapErr(op, key string, err error) error {
	if err == nil {
		return nil
	}
	sentinel := sentinelOf(err)
	if sentinel == ErrNotHeld && sessionOps[op] {
		sentinel = ErrSessionNotFound
	}
	return &opError{msg: opKey(op, key) + ": " + err.Error(), errs: causes(sentinel, limitMismatchOf(err), err)}
}

// sessionOps are the operations whose NotFound answer means the session
// is gone (Acquire is NotFound only for its session).
var sessionOps = map[string]bool{"acquire": true, "keepalive": true, "close session": true, "get session": true}

// opKey names an operation in error messages: `acquire "k"` or `status`.
func opKey(op, key string) string {
	if key == "" {
		return op
	}
	return fmt.Sprintf("%s %q", op, key)
}

// giveUpErr is the error of a call whose ctx ended while retrying: it wraps
// the ctx error and, when there was one, the last attempt's failure (and
// its sentinel, matched by errors.Is but not repeated in the text).
func giveUpErr(ctx context.Context, op, key string, last error) error {
	cause := context.Cause(ctx)
	if cause == nil {
		cause = ctx.Err()
	}
	if last == nil {
		return fmt.Errorf("%s: %w", opKey(op, key), cause)
	}
	msg := fmt.Sprintf("%s: %v; last failure: %v", opKey(op, key), cause, last)
	return &opError{msg: msg, errs: causes(cause, sentinelOf(last), last)}
}

// causes returns errs without the nil ones.
func causes(errs ...error) []error {
	out := errs[:0]
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// opError is an error of this package whose text is written for people
// (the operation, then the server's code and message once) and whose
// causes (a sentinel, the *connect.Error, the ctx error) are matched by
// errors.Is and errors.As.
type opError struct {
	msg  string
	errs []error
}

// Error implements error.
func (e *opError) Error() string { return e.msg }

// Unwrap returns the causes.
func (e *opError) Unwrap() []error { return e.errs }
