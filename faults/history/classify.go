package history

import (
	"errors"
	"syscall"

	"connectrpc.com/connect"
)

// Classify maps the error of a call of kind k to an Outcome and a short code
// for humans. Only errors that prove the request changed nothing are Fail:
// InvalidArgument for every call, AlreadyExists for Acquire (held, not
// waiting: docs/design.md#waiting-and-fairness), ResourceExhausted for
// Acquire (a limit refuses it before any
// proposal), and NotFound for Release and Renew. Everything else — timeouts,
// cancellations, connection errors, Unavailable (a proposal may be in flight
// when leadership is lost), Internal, Unknown — is Unknown: the call may
// have taken effect, now or later.
//
// Shared locks, semaphores and sessions add: FailedPrecondition for Acquire (a LimitMismatch: another
// limit than the key's) and Renew (a lock held under a session), NotFound for
// KeepAlive and CloseSession (an unknown or ended session), and
// ResourceExhausted for CreateSession (too many sessions): each is decided
// before anything changes. (An Acquire's NotFound, an unknown session, stays
// Unknown: Classify does not see whether the request named a session.)
//
// A refused connection (ECONNREFUSED: the node is down) is Fail: the request
// was never sent.
func Classify(k Kind, err error) (Outcome, string) {
	if err == nil {
		return OK, ""
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return Fail, "connection refused"
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return Unknown, "transport: " + err.Error()
	}
	code := ce.Code()
	switch {
	case code == connect.CodeInvalidArgument:
		return Fail, code.String()
	case k == Acquire && (code == connect.CodeAlreadyExists || code == connect.CodeResourceExhausted || code == connect.CodeAborted):
		return Fail, code.String()
	case (k == Release || k == Renew) && code == connect.CodeNotFound:
		return Fail, code.String()
	case (k == Acquire || k == Renew) && code == connect.CodeFailedPrecondition:
		return Fail, code.String()
	case (k == KeepAlive || k == CloseSession) && code == connect.CodeNotFound:
		return Fail, code.String()
	case k == CreateSession && code == connect.CodeResourceExhausted:
		return Fail, code.String()
	}
	return Unknown, code.String()
}
