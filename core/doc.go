// Package core is the deterministic heart of ticketd: the replicated commands
// (Grant, Release, Expire, Noop, SetMember) and their results, their versioned
// wire encoding, the StateMachine (lock table + fencing-token counter + applied
// index), its deterministic snapshot format, request validation, and the
// Consensus contract every backend meets.
//
// core has no clock, no I/O beyond the io.Reader/io.Writer it is handed, no
// goroutines and no Raft library: every node that applies the same log reaches
// the same state, byte for byte (Raft thesis §2.1, replicated state machines).
//
// # Determinism
//
// Apply reads no clock and no randomness and never depends on map order. Lease
// deadlines are not replicated state, only each lock's lease length in
// milliseconds is; the server's lessor keeps deadlines on its own monotonic
// clock. Fencing tokens start at 1 and grow by one per grant of a free key,
// cluster wide (Chubby §2.4 sequencers; Kleppmann's fencing tokens). Release
// and Expire carry the token, so a late or duplicated one never removes a
// lock granted since. An index at or below AppliedIndex is not applied again.
//
// Encoded commands (Encode) and snapshots (Snapshot.WriteTo) both start with a
// version byte, CommandVersion and SnapshotVersion. A node that meets an
// unknown version or undecodable bytes gets an error wrapping ErrDecode and
// must stop: skipping an entry would fork the state.
//
// # Usage
//
// The server prepares commands; a backend drives a StateMachine as a Raft
// replicated state machine (hashicorp raft.FSM; etcd raft's CommittedEntries):
//
//  1. Check request fields with ValidateKey, ValidateOwner, ValidateLease and
//     ValidateToken (errors wrap ErrInvalidArgument) and Encode the Command
//     once; propose those bytes.
//  2. Create the StateMachine with NewStateMachine, or Restore it from the
//     latest snapshot; then replay the log after it (replayed indexes at or
//     below AppliedIndex are no-ops).
//  3. For every committed log entry, in log order and from one goroutine, call
//     ApplyEntry(index, data), or Skip(index) for entries that carry no ticketd
//     command. An error is fatal: stop the node rather than skip the entry.
//  4. To snapshot, take Snapshot() (O(1), copy-on-write) and WriteTo a sink
//     from any goroutine while Apply goes on; compact the log up to the
//     snapshot's AppliedIndex once it is durable.
//  5. Serve reads (Get, Range, LastToken, ...) from any goroutine; they are
//     safe concurrently with Apply but only linearizable after a
//     Consensus.ReadIndex.
//
// A sample apply loop:
//
//	for _, e := range committed {
//		cmd, res, err := sm.ApplyEntry(e.Index, e.Data)
//		if err != nil {
//			return err // fatal: never skip
//		}
//		notify(e.Index, cmd, res)
//	}
package core
