package httpapi

import (
	"net/http"

	connectcors "connectrpc.com/cors"
	"github.com/rs/cors"

	"github.com/ticketd/ticketd/server/forward"
)

// corsMaxAgeSeconds is how long a browser may cache a preflight answer.
const corsMaxAgeSeconds = 7200

// withCORS lets browser pages on origins call the API with Connect and
// gRPC-Web: preflight requests are answered and the protocols' headers are
// allowed and exposed (connectrpc.com/cors lists them; github.com/rs/cors
// applies them). No origins: h unchanged, CORS off (browsers refuse
// cross-origin calls).
func withCORS(origins []string, h http.Handler) http.Handler {
	if len(origins) == 0 {
		return h
	}
	c := cors.New(cors.Options{
		AllowedOrigins: origins,
		AllowedMethods: connectcors.AllowedMethods(),
		// Authorization carries a bearer token (--auth-tokens-file) from
		// browser clients; the protocols' own headers come from connectcors.
		AllowedHeaders: append(connectcors.AllowedHeaders(), "Authorization"),
		ExposedHeaders: append(connectcors.ExposedHeaders(), forward.LeaderHeader),
		MaxAge:         corsMaxAgeSeconds,
	})
	return c.Handler(h)
}
