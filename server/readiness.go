package server

import "github.com/ticketd/ticketd/server/httpapi"

// This file answers the lock service's part of /readyz (httpapi.Node): the
// conditions only the node knows, after the health status the HTTP side
// checks itself (docs/operations.md#health-and-monitoring).

// ReadyMaxApplyLag is how many committed entries a ready node may have left
// to apply (entries): beyond it, it is still catching up (after a restart
// or a snapshot install) and /readyz reports 503.
const ReadyMaxApplyLag = 1024

// ReadyChecks evaluates the node's readiness conditions for /readyz, in
// order: not shutting down, the backend started and a leader known, no
// replay in progress after a restart, and applied within ReadyMaxApplyLag
// of the commit index this node knows. Safe to call from any goroutine.
func (n *Node) ReadyChecks() []httpapi.Check {
	out := []httpapi.Check{httpapi.NewCheck("shutdown", !n.role.isClosing(), "shutting down")}
	select {
	case <-n.ready:
	default:
		return append(out, httpapi.NewCheck("leader", false, "backend not started"))
	}
	st := n.raft.Status()
	return append(out,
		httpapi.NewCheck("leader", st.Leader.ID != "", "no leader known (election in progress or no quorum)"),
		httpapi.NewCheck("replay", st.AppliedIndex >= st.RecoveredCommitIndex, "replaying after restart: applied %d of %d",
			st.AppliedIndex, st.RecoveredCommitIndex),
		httpapi.NewCheck("apply_lag", st.CommitIndex <= st.AppliedIndex+ReadyMaxApplyLag, "applied %d, commit %d: more than %d behind",
			st.AppliedIndex, st.CommitIndex, ReadyMaxApplyLag),
	)
}
