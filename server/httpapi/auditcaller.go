package httpapi

import (
	"context"
	"net/http"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/server/forward"
	"github.com/ticketd/ticketd/server/security"
)

// This file describes the caller of a request in the audit log: who sent
// it, as the connection shows it (not the authenticated principal, which
// package security derives and the audit lines log beside it).

// callerKey is the context key of a request's caller description.
type callerKey struct{}

// withCaller records who sent each request in its context: the verified
// client certificate's CN when the connection presented one, else the remote
// address (membership and leadership changes are logged with it), and the
// connection's TLS state, from which the auth interceptor takes the
// principal (security.WithConnState).
//
// It is on every request's path, so it stores the request itself (one
// context value, no copy of anything) and AuditCaller describes the caller
// only when an audit line is written (keeping allocations off the request
// path); a plaintext connection records no TLS state (security.ConnStateFrom
// is nil either way).
func withCaller(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), callerKey{}, r)
		if r.TLS != nil {
			ctx = security.WithConnState(ctx, r.TLS)
		}
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// auditText is the caller of r as the audit log names it.
func auditText(r *http.Request) string {
	who := r.RemoteAddr
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		who = "cn=" + r.TLS.VerifiedChains[0][0].Subject.CommonName + " " + r.RemoteAddr
	}
	// The forwarding node's name is believed only from a connection with
	// a node certificate: a client could send the header itself to
	// dress up the audit log.
	if by := r.Header.Get(forward.Header); by != "" && r.TLS != nil &&
		len(r.TLS.PeerCertificates) > 0 && security.IsNodeCertificate(r.TLS.PeerCertificates[0]) {
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
	r, _ := ctx.Value(callerKey{}).(*http.Request)
	if r == nil {
		return zap.String("caller", "unknown")
	}
	return zap.String("caller", auditText(r))
}
