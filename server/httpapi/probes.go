package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/grpchealth"

	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
)

// Paths of the plain-HTTP probes, beside grpchealth, for load balancers and
// Kubernetes (livenessProbe, readinessProbe); the names and the
// `?verbose` listing follow the Kubernetes API server's /livez and /readyz.
const (
	// LivezPath answers 200 while the process serves HTTP.
	LivezPath = "/livez"
	// ReadyzPath answers 200 when the node can serve requests (every
	// readyChecks condition holds), 503 otherwise.
	ReadyzPath = "/readyz"
)

// Check is one named condition of /readyz: OK with an empty Detail, or
// failed with a short reason.
type Check struct {
	Name   string
	OK     bool
	Detail string
}

// NewCheck is the check name: OK when ok holds, else failed with the
// reason format and args describe (fmt.Sprintf, evaluated only then).
func NewCheck(name string, ok bool, format string, args ...any) Check {
	c := Check{Name: name, OK: ok}
	if !ok {
		c.Detail = fmt.Sprintf(format, args...)
	}
	return c
}

// readyChecks evaluates every readiness condition: Raft running (health
// SERVING: no fatal error, not shut down), then the lock service's own
// (Node.ReadyChecks). Safe to call from any goroutine.
func (s *Server) readyChecks(r *http.Request) []Check {
	health := grpchealth.StatusUnknown
	if res, err := s.health.Check(r.Context(), &grpchealth.CheckRequest{Service: ticketv1connect.LockServiceName}); err == nil {
		health = res.Status
	}
	out := []Check{NewCheck("raft", health == grpchealth.StatusServing, "raft stopped or not started (health %v)", health)}
	return append(out, s.node.ReadyChecks()...)
}

// livez serves LivezPath: 200 "ok" while the process answers HTTP (restart
// it when this fails; a node whose Raft stopped exits on its own).
func (s *Server) livez(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintln(w, "ok")
}

// readyz serves ReadyzPath: 200 "ok" when every readyChecks condition
// holds, else 503 with the first failed check; with ?verbose, one line per
// check ("[+]leader ok", "[-]replay failed: ...").
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	checks := s.readyChecks(r)
	var b strings.Builder
	failed := ""
	for _, c := range checks {
		if c.OK {
			fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
			continue
		}
		fmt.Fprintf(&b, "[-]%s failed: %s\n", c.Name, c.Detail)
		if failed == "" {
			failed = c.Name + ": " + c.Detail
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if failed != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, verbose := r.URL.Query()["verbose"]
	switch {
	case verbose:
		_, _ = fmt.Fprint(w, b.String())
	case failed != "":
		_, _ = fmt.Fprintf(w, "not ready: %s\n", failed)
	default:
		_, _ = fmt.Fprintln(w, "ok")
	}
}
