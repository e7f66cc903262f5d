package httpapi

import (
	"net/http"
	"strings"
)

// This file routes the API's procedure calls to their service's handler
// without net/http's ServeMux.
//
// ServeMux matches every request against its patterns: it checks the host,
// cleans the path and walks its routing tree, then records the pattern on
// the request. For the API's procedures that was 1.5–3 % of the leader's
// CPU in a lock cycle and in a session KeepAlive at 64 clients
// (docs/benchmarks.md#request-path-where-a-lock-cycles-cpu-goes), for an
// answer known in advance: a path that is exactly a procedure's
// ("/ticket.v1.LockService/Acquire") is clean, and the mux would give it to
// the handler mounted at its service's prefix ("/ticket.v1.LockService/"),
// since no pattern names a host or a longer path under a service. So such
// paths are looked up in a map built once; every other request (the
// console, the probes, /metrics, health, reflection, a path that names no
// procedure, one to be cleaned or redirected) still goes through the mux.

// withProcedureRoutes serves a request whose path is one of procedures
// with the handler services mounts at that procedure's service prefix, and
// any other with mux. services maps a service's path prefix ("/" + service
// name + "/", as connect's NewXServiceHandler returns it) to its handler,
// the same handler mux has at that pattern.
func withProcedureRoutes(procedures []string, services map[string]http.Handler, mux http.Handler) http.Handler {
	routes := make(map[string]http.Handler, len(procedures))
	for _, path := range procedures {
		if i := strings.LastIndexByte(path, '/'); i > 0 {
			if h, ok := services[path[:i+1]]; ok {
				routes[path] = h
			}
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := routes[r.URL.Path]; ok {
			h.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}
