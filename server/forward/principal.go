package forward

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	"github.com/ticketd/ticketd/server/security"
)

// options are the connect options of the Forwarder's clients: Config.Options
// and the interceptor that carries the caller's identity on every request
// made on a handler's behalf (forwarded unary requests, relayed streams such
// as ClusterService.Snapshot, and the leader's probes of members during
// AddMember and RemoveMember).
func (f *Forwarder) options() []connect.ClientOption {
	return append([]connect.ClientOption{connect.WithInterceptors(principalInterceptor{})}, f.cfg.Options...)
}

// principalInterceptor applies carryPrincipal to every outgoing request of
// a Forwarder's client, unary or streaming. It is a client-side interceptor
// only: on a handler it does nothing.
type principalInterceptor struct{}

var _ connect.Interceptor = principalInterceptor{}

// WrapUnary carries the principal on an outgoing unary request.
func (principalInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			carryPrincipal(ctx, req.Header())
		}
		return next(ctx, req)
	}
}

// WrapStreamingClient carries the principal on an outgoing stream (client,
// server or bidi): the request headers are set before the stream sends
// anything, since connect sends them with the first message or with
// CloseRequest.
func (principalInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		carryPrincipal(ctx, conn.RequestHeader())
		return conn
	}
}

// WrapStreamingHandler leaves handlers alone.
func (principalInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// carryPrincipal puts the original caller's identity on a request made on
// its behalf (a forwarded request, a membership probe), in headers h, so that the leader authorizes the caller and binds
// its locks to the caller, never to the forwarding node
// (docs/security.md#forwarding-keeps-the-callers-principal):
//
//   - a caller that authenticated with a bearer token: its Authorization
//     header is passed on unchanged and the leader checks the token itself
//     (this needs no trust in the forwarder, and works without TLS);
//   - a caller authenticated by its client certificate (or itself
//     forwarded): the principal goes in security.PrincipalHeader, which the
//     leader believes only because this node presents its node certificate,
//     whose CN is a member (security.Authenticator.Authenticate).
//
// Without a principal in ctx (authorization off) nothing is added. Any
// PrincipalHeader the caller sent itself is never copied: the interceptor
// refused such a request before it got here.
func carryPrincipal(ctx context.Context, h http.Header) {
	p, ok := security.PrincipalFrom(ctx)
	if !ok {
		return
	}
	if p.Source == security.SourceToken {
		if ci, ok := connect.CallInfoForHandlerContext(ctx); ok {
			if auth := ci.RequestHeader().Get("Authorization"); auth != "" {
				h.Set("Authorization", auth)
				return
			}
		}
	}
	h.Set(security.PrincipalHeader, p.Name)
}
