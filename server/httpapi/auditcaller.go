package httpapi

import (
	"context"
	"crypto/tls"
	"net/http"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/server/forward"
	"github.com/ticketd/ticketd/server/security"
)

// This file describes the caller of a request in the audit log: who sent
// it, as the connection shows it (not the authenticated principal, which
// package security derives and the audit lines log beside it).

// callerKey is the context key of a request's caller description.
type callerKey struct{}

// withCaller records who sent each request over TLS in its context: the
// request itself (one context value, no copy of anything; AuditCaller
// describes the caller only when an audit line is written) and the
// connection's TLS state, from which the auth interceptor takes the
// principal (security.WithConnState).
//
// A plaintext request passes unchanged: it has no TLS state to record, and
// its caller (the remote address and a forwarding header, both only
// claims) is what connect already keeps in the call's context
// (connect.CallInfoForHandlerContext), where AuditCaller finds it. Giving
// every request a context of its own cost two allocations (the context
// value and net/http's copy of the request, Request.WithContext) on every
// call of the API (docs/benchmarks.md, "The API call path at 64 clients").
func withCaller(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			h.ServeHTTP(w, r)
			return
		}
		ctx := security.WithConnState(context.WithValue(r.Context(), callerKey{}, r), r.TLS)
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// auditText is the caller as the audit log names it, from the request's
// remote address, its connection's TLS state (nil: plaintext) and its
// header.
func auditText(remoteAddr string, cs *tls.ConnectionState, header http.Header) string {
	who := remoteAddr
	if cs != nil && len(cs.VerifiedChains) > 0 && len(cs.VerifiedChains[0]) > 0 {
		who = "cn=" + cs.VerifiedChains[0][0].Subject.CommonName + " " + remoteAddr
	}
	// The forwarding node's name is believed only from a connection with
	// a node certificate: a client could send the header itself to
	// dress up the audit log.
	if by := header.Get(forward.Header); by != "" && cs != nil &&
		len(cs.PeerCertificates) > 0 && security.IsNodeCertificate(cs.PeerCertificates[0]) {
		who += " forwarded-by=" + by
	} else if by != "" {
		who += " claims-forwarded-by=" + by
	}
	return who
}

// AuditCaller is the zap field ("caller") naming who sent the request of
// ctx, for the audit log: "cn=<client certificate CN> <remote address>" or
// the remote address, with "forwarded-by=<node>" when a node certificate
// vouches for the forwarding header and "claims-forwarded-by=<name>" when
// nothing does; "unknown" for a context that did not come through the API
// handler.
func AuditCaller(ctx context.Context) zap.Field {
	if r, _ := ctx.Value(callerKey{}).(*http.Request); r != nil {
		return zap.String("caller", auditText(r.RemoteAddr, r.TLS, r.Header))
	}
	if call, ok := connect.CallInfoForHandlerContext(ctx); ok {
		return zap.String("caller", auditText(call.Peer().Addr, nil, call.RequestHeader()))
	}
	return zap.String("caller", "unknown")
}
