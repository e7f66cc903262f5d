package sdk

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// WithBearerToken sends token as `Authorization: Bearer <token>` on every
// request, for a server whose --auth-tokens-file lists the token's SHA-256
// digest (the token authenticates as the principal it is bound to, as a
// Consul ACL token does). Use it over TLS (WithTLS, https endpoints): a
// token is a password. An empty token sends nothing.
func WithBearerToken(token string) Option {
	return func(c *config) { c.bearerToken = token }
}

// bearerInterceptor adds the Authorization header to every outgoing request.
type bearerInterceptor struct{ header string }

// WrapUnary implements connect.Interceptor.
func (b bearerInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			req.Header().Set("Authorization", b.header)
		}
		return next(ctx, req)
	}
}

// WrapStreamingClient implements connect.Interceptor.
func (b bearerInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", b.header)
		return conn
	}
}

// WrapStreamingHandler implements connect.Interceptor (handlers pass through).
func (b bearerInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// ForceRelease releases whatever lock key holds, whoever holds it: an
// administrator's recovery tool (ReleaseRequest.force; the caller needs the
// admin permission when the server has authorization on, and the server
// writes it to its audit log). Not retried past an ambiguous outcome: a
// repeated force-release could end a lock granted since.
//
// Errors: ErrNotHeld (key is not held), ErrPermissionDenied,
// ErrUnauthenticated, ErrInvalidArgument, *AmbiguousError.
func (c *Client) ForceRelease(ctx context.Context, key string) error {
	req := &ticketv1.ReleaseRequest{Key: key, Force: true}
	spec := callSpec{op: "force-release", key: key, toLeader: true, timeout: c.cfg.requestTimeout, mutates: true}
	_, out, err := invoke(ctx, c, spec, func(ctx context.Context, n *node) (*ticketv1.ReleaseResponse, error) {
		return n.lock.Release(ctx, req)
	})
	if errors.Is(err, ErrNotHeld) && out.maybeEarlier {
		return nil
	}
	return err
}

// refusedCredentials reports whether a server refused the client's
// credentials or their permissions (Unauthenticated, PermissionDenied), or
// a TLS handshake failed on a certificate (tlsRefused): another node or a
// retry gets the same answer, so it is final.
func refusedCredentials(err error) bool {
	if tlsRefused(err) {
		return true // a certificate one side will not accept
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		return connect.IsWireError(err)
	}
	return false
}
