package server

import (
	"context"
	"net/http"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/server/forward"
)

// callerKey is the context key of a request's caller description.
type callerKey struct{}

// withCaller records who sent each request in its context: the verified
// client certificate's CN when the connection presented one, else the remote
// address. Membership and leadership changes are logged with it.
func withCaller(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := r.RemoteAddr
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
			who = "cn=" + r.TLS.VerifiedChains[0][0].Subject.CommonName + " " + r.RemoteAddr
		}
		if by := r.Header.Get(forward.Header); by != "" {
			who += " forwarded-by=" + by
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, who)))
	})
}

// callerField is the zap field naming the caller of the request of ctx.
func callerField(ctx context.Context) zap.Field {
	who, _ := ctx.Value(callerKey{}).(string)
	if who == "" {
		who = "unknown"
	}
	return zap.String("caller", who)
}
