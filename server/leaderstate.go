package server

// This file is the state only the promoted leader uses: what it has in
// flight that the replicated table does not show yet, counted so that
// concurrent requests cannot overshoot a limit, the KeepAlive rounds it
// merges and the renewals it writes together. The lessor's marks of the
// holders being removed (ghost Releases, CloseSessions in flight) are not
// here: the lessor answers for every holder that is ending
// (lessor.Lessor.Ending).
//
// It is made with the node and never reset. Every entry is added by one
// request and removed by that same request when its proposal returns
// (applied or failed), whatever the node's role by then, so a leadership
// change leaves nothing behind. Only requests served on the promoted leader
// (route) add to it.

// leaderState is the leader-only state of a Node. The zero value is ready;
// each part is safe for concurrent use.
type leaderState struct {
	// sessionCreates counts CreateSession proposals in flight, in total and
	// per principal, so that concurrent creates cannot overshoot
	// limits.max_sessions or limits.max_sessions_per_principal
	// (sessioncount.go).
	sessionCreates createsInFlight
	// keepAlives merges concurrent KeepAlives of one session into one
	// entry in flight at a time (keepalivebatch.go).
	keepAlives keepAliveBatches
	// renewals writes the renewals (KeepAlive rounds, Renews) that arrive
	// together into shared entries (renewbatch.go).
	renewals renewalRounds
	// sessSlots counts Acquire requests under each session in progress, so
	// that concurrent ones cannot overshoot limits.max_locks_per_session
	// (sessionlocks.go).
	sessSlots sessionSlots
	// lockGrants counts Grant proposals in flight per principal, so that
	// concurrent ones cannot overshoot a principal's lock quota (quota.go).
	lockGrants grantsInFlight
}
