package hashicorp

import (
	"runtime"
)

// This file is what both Raft stable stores (badger's logStore, raft-wal's
// walStore) do when a write of the stable state (currentTerm, and the term
// and candidate of the last vote) fails.

// stableFailed reports err, a failed stable-store write, to the fail-stop
// (failed: Config.OnFatal, then the process exits with status 1) and, once
// hashicorp/raft runs (raftRuns), does not return. hashicorp/raft panics on
// a failed term write (raft.go setCurrentTerm, "failed to save current
// term"), which would end the process with a Go crash dump and exit status
// 2 before the fail-stop could; a failed vote write it only logs. So the
// calling goroutine, hashicorp/raft's run loop (every stable write after
// NewRaft comes from it), ends here (runtime.Goexit): its deferred calls
// run, so an RPC being handled is answered with a refusal (a vote not
// granted, an append not accepted), and nothing is done with a term or vote
// that is not on disk. Raft thesis §3.4 (Figure 3.1, "Rules for Servers"): a
// server persists currentTerm and votedFor before it answers an RPC; one
// that cannot persist them may neither vote nor campaign. Node.halt's
// Shutdown of hashicorp/raft still returns: the ended loop has left raft's
// goroutine group (goFunc's deferred Done).
//
// Before raft runs (BootstrapCluster, RecoverCluster, on the caller's
// goroutine) the error is returned: those return it to New, which fails.
func (h *logHooks) stableFailed(err error) error {
	err = h.failed(err)
	if h.raftRuns.Load() {
		runtime.Goexit()
	}
	return err
}
