// Package core is the deterministic heart of ticketd: the replicated commands
// (Grant, Release, Renew, Expire, Noop, SetMember, and the session commands
// CreateSession, KeepAliveSession, CloseSession, ExpireSession) and their
// results, their versioned wire encoding, the StateMachine (lock table of
// holders per key + sessions + lock-delay records + fencing-token counter +
// applied index), its deterministic snapshot format, request validation, and
// the Consensus contract every backend meets.
//
// core has no clock, no I/O beyond the io.Reader/io.Writer it is handed, no
// goroutines and no Raft library: every node that applies the same log reaches
// the same state, byte for byte (Raft thesis §2.1, replicated state machines).
//
// # Determinism
//
// Apply reads no clock and no randomness and never depends on map order. Lease
// deadlines are not replicated state, only each lock's lease length in
// milliseconds and the log index of its last change (Lock.ModIndex: its
// creating Grant, last Renew or last retry Grant) are; every node's lessor
// counts a deadline from its own apply of the entry at ModIndex, on its own
// monotonic clock (docs/design.md#leases). Fencing tokens start at 1 and grow by
// one per grant of a free key, cluster wide (Chubby §2.4 sequencers;
// Kleppmann's fencing tokens), and every holder of a shared key or semaphore
// gets its own. Release, Renew and Expire carry the token, so a late or
// duplicated one never touches a holder granted since; an Expire also carries
// the ModIndex the leader saw (ExpireSeen), so it never removes a holder
// renewed since, and an ExpireSession the session's. An index at or below
// AppliedIndex is not applied again.
//
// # Holders, modes, limits and sessions (docs/semantics.md#shared-locks-semaphores-and-sessions)
//
// A key has a set of holders; while it has any, it has a Mode and a Limit
// set by its first Grant: a plain exclusive lock (ModeExclusive, Limit 0:
// one holder, the only kind of CommandVersion 1 and 2), a shared key (ModeShared, Limit 0: any
// number of shared holders, never an exclusive one beside them; Chubby shared
// locks, Curator InterProcessReadWriteLock) or a semaphore (Limit N ≥ 1: up
// to N holders; Curator InterProcessSemaphoreV2, Consul semaphores). A
// Grant with another Limit than the key's is OutcomeLimitMismatch; one that
// would exceed the limit or mix modes is OutcomeGrantRejected. Fairness
// (FIFO, writer preference) is the server's waiter queue's, not core's: the
// Results of shared and semaphore keys carry Mode, Limit and Holders for it.
// A session (etcd leases, Consul sessions) is one lease for many holders:
// its id is the index of its CreateSession, its holders' LeaseMS is its TTL,
// one KeepAliveSession renews them all, and CloseSession or ExpireSession
// removes them all in one entry (Result.Ended lists them).
//
// # Commands (docs/design.md#replicated-commands)
//
//	Grant{key, lease_ms, owner, lock_delay_ms, principal}
//	    free key → new lock, token LastToken+1, ModIndex = index; clears key's LockDelay
//	    same owner and principal → that lock (a retry), ModIndex = index,
//	        whatever mode, limit or session the Grant asks: the leader proposes
//	        a same-owner Grant only when they match the holder's and answers
//	        no other (docs/design.md#replicated-commands); apply keeps this
//	        rule, since changing it would change what existing command
//	        versions do
//	    otherwise → GrantRejected{holder token}
//	Release{key, token}   held with token → removed; Released, else NotFound
//	Renew{key, token}     held with token → ModIndex = index; Renewed{lease_ms}, else NotFound
//	Expire{key, token, seen_index}
//	    held with token and (seen_index = 0 or ModIndex ≤ seen_index) → removed,
//	    Expired{existed, lock_delay_ms}, and a LockDelay{index} if lock_delay_ms > 0;
//	    otherwise Expired{existed: false}
//	Noop, SetMember{id, api_addr}   → Noop
//	Grant{…, mode, limit, session}  per holder, see Grant: LimitMismatch{limit},
//	    GrantRejected{oldest holder}, SessionNotFound, or a new holder beside the others
//	CreateSession{ttl_ms}           → SessionCreated{session = index}
//	KeepAliveSession{id}            → Renewed{ttl, session}: ModIndex = index, else NotFound
//	CloseSession{id}                → Released{session, ended}, else NotFound
//	ExpireSession{id, seen_index}   → Expired{existed, session, ended} if unchanged since seen_index
//	RenewBatch{sessions, locks}     → Renewed{batch}: each session as KeepAliveSession{id} and then
//	    each lock as Renew{key, token} at this index, one Result each (EachRenewal takes it apart)
//
// Lock-delay (Chubby §2.4, Consul sessions) is recorded, not timed, here: the
// leader proposes no Grant for a key with a LockDelay record until
// lock_delay_ms has passed on its own clock since its apply of the Expire.
// A lock's Principal binds it to the identity that took it: the same owner
// under another principal is not a retry
// (docs/security.md#locks-are-bound-to-their-principal).
//
// Encoded commands (Encode) and snapshots (Snapshot.WriteTo) both start with a
// version byte. Commands that use only the original fields keep
// CommandVersion (1), byte for byte as before; Renew, seen_index, lock-delay
// and principals take CommandVersion2, and modes, limits and sessions
// CommandVersion3, and a RenewBatch CommandVersion4, so that an older node
// stops on them instead of applying them differently. Snapshots of a state
// that uses no mode, limit or session are written as SnapshotVersion2, byte
// for byte as before; others as
// SnapshotVersion (3). Restore reads both, and SnapshotVersion1 as an
// upgrade (ModIndex 0, no lock-delay, no principal). A node that meets an unknown version or
// undecodable bytes gets an error wrapping ErrDecode and must stop: skipping
// an entry would fork the state.
//
// # Usage
//
// The server prepares commands; a backend drives a StateMachine as a Raft
// replicated state machine (hashicorp raft.FSM; etcd raft's CommittedEntries):
//
//  1. Check request fields with ValidateKey, ValidateOwner, ValidatePrincipal,
//     ValidateLease, ValidateLockDelay, ValidateMode, ValidateToken and
//     ValidateSession (errors wrap ErrInvalidArgument) and Encode the Command
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
//  5. Serve reads (Get, Holders, Holder, Range, Session, LockDelay, LastToken, ...) from any goroutine; they are
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
