package security

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
)

// need is what a procedure requires of its caller's principal.
type need struct {
	perm Permission // 0: any authenticated principal
	// key returns the key (or prefix) the permission applies to.
	key func(msg any) string
	// prefix: key is a prefix, every key under it must be allowed.
	prefix bool
	// anywhere: the request is bound to no key; perm on at least one
	// prefix suffices (Policy.AllowedAnywhere).
	anywhere bool
}

func keyOf(msg any) string {
	if m, ok := msg.(interface{ GetKey() string }); ok {
		return m.GetKey()
	}
	return ""
}

func prefixOf(msg any) string {
	if m, ok := msg.(interface{ GetPrefix() string }); ok {
		return m.GetPrefix()
	}
	return ""
}

// needs maps ticket.v1 procedures to what they require (docs/security.md#principals):
// read covers GetLock, ListLocks, CheckToken and Watch; lock covers Acquire,
// Renew and Release; admin the ClusterService mutations and Snapshot. Status
// needs only authentication. Sessions: CreateSession needs lock
// on at least one prefix; KeepAlive (and KeepAliveStream, whose every
// message is checked so) and CloseSession need only
// authentication here, as the handler checks that the session is the
// caller's (or, to close it, that the caller is an admin); GetSession and
// ListSessions too, as the handler shows a principal only its own sessions
// (an admin every session). A ticket.v1
// procedure missing here needs admin
// (deny by default); other services (health, reflection) need only
// authentication.
var needs = map[string]need{
	ticketv1connect.LockServiceAcquireProcedure:           {perm: PermLock, key: keyOf},
	ticketv1connect.LockServiceRenewProcedure:             {perm: PermLock, key: keyOf},
	ticketv1connect.LockServiceReleaseProcedure:           {perm: PermLock, key: keyOf},
	ticketv1connect.LockServiceGetLockProcedure:           {perm: PermRead, key: keyOf},
	ticketv1connect.LockServiceCheckTokenProcedure:        {perm: PermRead, key: keyOf},
	ticketv1connect.LockServiceListLocksProcedure:         {perm: PermRead, key: prefixOf, prefix: true},
	ticketv1connect.LockServiceWatchProcedure:             {perm: PermRead, key: prefixOf, prefix: true},
	ticketv1connect.LockServiceCreateSessionProcedure:     {perm: PermLock, anywhere: true},
	ticketv1connect.LockServiceKeepAliveProcedure:         {},
	ticketv1connect.LockServiceKeepAliveStreamProcedure:   {},
	ticketv1connect.LockServiceCloseSessionProcedure:      {},
	ticketv1connect.LockServiceGetSessionProcedure:        {},
	ticketv1connect.LockServiceListSessionsProcedure:      {},
	ticketv1connect.ClusterServiceStatusProcedure:         {},
	ticketv1connect.ClusterServiceAddMemberProcedure:      {perm: PermAdmin},
	ticketv1connect.ClusterServiceRemoveMemberProcedure:   {perm: PermAdmin},
	ticketv1connect.ClusterServiceTransferLeaderProcedure: {perm: PermAdmin},
	ticketv1connect.ClusterServiceSnapshotProcedure:       {perm: PermAdmin},
}

// needOf returns what procedure requires.
func needOf(procedure string) need {
	if n, ok := needs[procedure]; ok {
		return n
	}
	if len(procedure) > len("/ticket.v1.") && procedure[:len("/ticket.v1.")] == "/ticket.v1." {
		return need{perm: PermAdmin}
	}
	return need{}
}

// authorize checks the request message msg of procedure against the
// policy for p. A Release with force needs admin. Errors wrap
// ErrPermissionDenied; a denied admin request is written to the audit log.
func (a *Authenticator) authorize(p Principal, procedure string, msg any) error {
	policy := a.currentPolicy()
	if policy == nil {
		return nil
	}
	n := needOf(procedure)
	if r, ok := msg.(*ticketv1.ReleaseRequest); ok && r.GetForce() {
		n = need{perm: PermAdmin}
	}
	if n.perm == 0 {
		return nil
	}
	if n.anywhere {
		if policy.AllowedAnywhere(p.Name, n.perm) {
			return nil
		}
		return fmt.Errorf("%w: principal %q has no %s permission on any prefix", ErrPermissionDenied, p.Name, n.perm)
	}
	key := ""
	if n.key != nil {
		key = n.key(msg)
	}
	if policy.Allowed(p.Name, key, n.perm) {
		return nil
	}
	what := fmt.Sprintf("key %q", key)
	switch {
	case n.perm == PermAdmin:
		what = "the cluster"
		a.cfg.Audit.Warn("admin request denied", zap.String("principal", p.Name),
			zap.String("source", p.Source), zap.String("procedure", procedure))
	case n.prefix:
		what = fmt.Sprintf("every key under prefix %q", key)
	}
	return fmt.Errorf("%w: principal %q has no %s permission on %s", ErrPermissionDenied, p.Name, n.perm, what)
}

// Interceptor returns the connect interceptor that, when authorization is on,
// authenticates every request (Authenticate), refuses it with
// Unauthenticated or, if the policy does not allow the procedure on the
// request's key or prefix, PermissionDenied, and otherwise puts the
// principal in the handler's context (PrincipalFrom). For a server stream
// the request message is checked when the handler receives it. With
// authorization off it does nothing. Install it on every handler of the
// client API; the HTTP layer must have recorded the connection's TLS state
// (WithConnState).
func (a *Authenticator) Interceptor() connect.Interceptor { return interceptor{a} }

type interceptor struct{ a *Authenticator }

// WrapUnary implements connect.Interceptor.
func (i interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if !i.a.Enabled() || req.Spec().IsClient {
			return next(ctx, req)
		}
		p, err := i.a.Authenticate(ctx, req.Header())
		if err != nil {
			return nil, ToConnect(err)
		}
		if err := i.a.authorize(p, req.Spec().Procedure, req.Any()); err != nil {
			return nil, ToConnect(err)
		}
		return next(WithPrincipal(ctx, p), req)
	}
}

// WrapStreamingClient implements connect.Interceptor (clients pass through).
func (i interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor.
func (i interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if !i.a.Enabled() {
			return next(ctx, conn)
		}
		p, err := i.a.Authenticate(ctx, conn.RequestHeader())
		if err != nil {
			return ToConnect(err)
		}
		return next(WithPrincipal(ctx, p), &checkedConn{StreamingHandlerConn: conn, a: i.a, p: p})
	}
}

// checkedConn authorizes every message a streaming handler receives.
type checkedConn struct {
	connect.StreamingHandlerConn
	a *Authenticator
	p Principal
}

// Receive implements connect.StreamingHandlerConn.
func (c *checkedConn) Receive(msg any) error {
	if err := c.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	if err := c.a.authorize(c.p, c.Spec().Procedure, msg); err != nil {
		return ToConnect(err)
	}
	return nil
}

// ToConnect maps this package's errors to connect errors: ErrUnauthenticated
// to Unauthenticated, ErrPermissionDenied to PermissionDenied,
// ErrQuotaExceeded to ResourceExhausted; anything else is returned unchanged.
func ToConnect(err error) error {
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return connect.NewError(connect.CodeUnauthenticated, err)
	case errors.Is(err, ErrPermissionDenied):
		return connect.NewError(connect.CodePermissionDenied, err)
	case errors.Is(err, ErrQuotaExceeded):
		return connect.NewError(connect.CodeResourceExhausted, err)
	}
	return err
}
