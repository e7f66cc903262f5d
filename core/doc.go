// Package core is the deterministic heart of ticketd: the replicated commands
// (Grant, Release, Expire, Noop, SetMember) and their results, their versioned
// wire encoding, the StateMachine (lock table + fencing-token counter + applied
// index), its deterministic snapshot format, request validation, and the
// Consensus contract every backend meets.
//
// core has no clock, no I/O beyond the io.Reader/io.Writer it is handed, no
// goroutines and no Raft library: every node that applies the same log reaches
// the same state, byte for byte.
//
// # Usage
//
// A backend drives a StateMachine as a Raft replicated state machine (Raft
// thesis §2.1; hashicorp raft.FSM; etcd raft's CommittedEntries):
//
//  1. Create it with NewStateMachine, or Restore it from the latest snapshot.
//  2. For every committed log entry, in log order, call ApplyEntry(index, data)
//     (or Skip(index) for entries that carry no ticketd command). An error is
//     fatal: stop the node rather than skip the entry.
//  3. To snapshot, take Snapshot() (O(1), copy-on-write) and WriteTo a sink
//     while Apply goes on; compact the log up to its AppliedIndex.
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
//
// Fencing tokens start at 1 and grow by one per successful Grant (Chubby §2.4
// sequencers; Kleppmann's fencing tokens).
package core
