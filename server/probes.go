package server

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
	// ReadyzPath answers 200 when the node can serve requests (see ready),
	// 503 otherwise.
	ReadyzPath = "/readyz"
)

// ReadyMaxApplyLag is how many committed entries a ready node may have left
// to apply (entries): beyond it, it is still catching up (after a restart
// or a snapshot install) and /readyz reports 503.
const ReadyMaxApplyLag = 1024

// probeCheck is one named check of /readyz; ok with an empty detail, or
// failed with a short reason.
type probeCheck struct {
	name   string
	ok     bool
	detail string
}

// readyChecks evaluates every readiness condition: Raft running (health
// SERVING: no fatal error, not shut down), not shutting down, a leader
// known, no replay in progress after a restart, and applied within
// ReadyMaxApplyLag of the commit index this node knows. Safe to call from
// any goroutine.
func (n *Node) readyChecks(r *http.Request) []probeCheck {
	var out []probeCheck
	add := func(name string, ok bool, format string, args ...any) {
		c := probeCheck{name: name, ok: ok}
		if !ok {
			c.detail = fmt.Sprintf(format, args...)
		}
		out = append(out, c)
	}
	health := grpchealth.StatusUnknown
	if res, err := n.health.Check(r.Context(), &grpchealth.CheckRequest{Service: ticketv1connect.LockServiceName}); err == nil {
		health = res.Status
	}
	add("raft", health == grpchealth.StatusServing, "raft stopped or not started (health %v)", health)
	add("shutdown", !n.role.isClosing(), "shutting down")
	select {
	case <-n.ready:
	default:
		add("leader", false, "backend not started")
		return out
	}
	st := n.raft.Status()
	add("leader", st.Leader.ID != "", "no leader known (election in progress or no quorum)")
	add("replay", st.AppliedIndex >= st.RecoveredCommitIndex, "replaying after restart: applied %d of %d",
		st.AppliedIndex, st.RecoveredCommitIndex)
	add("apply_lag", st.CommitIndex <= st.AppliedIndex+ReadyMaxApplyLag, "applied %d, commit %d: more than %d behind",
		st.AppliedIndex, st.CommitIndex, ReadyMaxApplyLag)
	return out
}

// livez serves LivezPath: 200 "ok" while the process answers HTTP (restart
// it when this fails; a node whose Raft stopped exits on its own).
func (n *Node) livez(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintln(w, "ok")
}

// readyz serves ReadyzPath: 200 "ok" when every readyChecks condition
// holds, else 503 with the first failed check; with ?verbose, one line per
// check ("[+]leader ok", "[-]replay failed: ...").
func (n *Node) readyz(w http.ResponseWriter, r *http.Request) {
	checks := n.readyChecks(r)
	var b strings.Builder
	failed := ""
	for _, c := range checks {
		if c.ok {
			fmt.Fprintf(&b, "[+]%s ok\n", c.name)
			continue
		}
		fmt.Fprintf(&b, "[-]%s failed: %s\n", c.name, c.detail)
		if failed == "" {
			failed = c.name + ": " + c.detail
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
