package core

// This file is the RenewBatch command: renewals (session KeepAlives and lock
// Renews) that reach the leader together, written as one log entry instead
// of one entry each. Every renewal stays a replicated command applied in log
// order on every node (docs/design.md#leases); the batch only shares the
// entry, as group commit shares an fsync (Raft thesis §10.2.1). Each
// renewal applies exactly as the KeepAliveSession or Renew of its own at the
// entry's index would, so every reader of applied entries can take a batch
// apart with EachRenewal and see what it would have seen without it.

// Renewals is what a RenewBatch renews: sessions first, then locks, each in
// the order given. Duplicates are allowed (the second one renews again, to
// the same index: no change).
type Renewals struct {
	// Sessions are the ids of the sessions to keep alive (KeepAliveSession).
	Sessions []uint64
	// Locks are the holders to renew (Renew).
	Locks []LockRef
}

// LockRef names one holder: its key and fencing token.
type LockRef struct {
	Key   string
	Token uint64
}

// Len returns the number of renewals in r.
func (r *Renewals) Len() int { return len(r.Sessions) + len(r.Locks) }

// BatchResult is, in Result.Batch, what each renewal of a RenewBatch
// produced, in the order of the command's Renewals: for a session,
// OutcomeRenewed with its TTL and id, or OutcomeNotFound; for a lock,
// OutcomeRenewed with its LeaseMS, or OutcomeNotFound (KeepAliveSession and
// Renew give exactly these).
type BatchResult struct {
	Sessions []Result
	Locks    []Result
}

// RenewBatch returns the command that keeps alive every session in sessions
// and renews every lock in locks, in one entry. Applied at index, each
// renewal does what KeepAliveSession(id) or Renew(key, token) applied at
// index would, sessions first, then locks, in order; the Result is
// OutcomeRenewed with Batch set (see BatchResult), whatever each renewal's
// outcome. It is written with CommandVersion4: an older node stops on it
// rather than skip it. Encode refuses an empty batch. RenewBatch keeps the
// slices (the caller must not change them afterwards) and does not validate
// the ids, keys or tokens.
func RenewBatch(sessions []uint64, locks []LockRef) Command {
	return Command{Op: OpRenewBatch, Batch: &Renewals{Sessions: sessions, Locks: locks}}
}

// renewBatch applies a RenewBatch at index (see RenewBatch).
func (s *StateMachine) renewBatch(index uint64, cmd Command) Result {
	b := cmd.Batch
	out := &BatchResult{Sessions: make([]Result, len(b.Sessions)), Locks: make([]Result, len(b.Locks))}
	for i, id := range b.Sessions {
		out.Sessions[i] = s.keepAliveSession(index, KeepAliveSession(id))
	}
	for i, l := range b.Locks {
		out.Locks[i] = s.renew(index, Renew(l.Key, l.Token))
	}
	return Result{Outcome: OutcomeRenewed, Batch: out}
}

// EachRenewal calls fn with every command an applied entry carries and its
// Result: for a RenewBatch (with its Result, Batch set), the
// KeepAliveSession of each session and then the Renew of each lock, in the
// batch's order, each with its own Result: exactly the calls those
// renewals would give had each been an entry of its own at the same index;
// for any other command, fn(cmd, res) once. A reader of applied entries
// (a lessor, a watch feed, a checker) handles a batch by going through it.
func EachRenewal(cmd Command, res Result, fn func(Command, Result)) {
	if cmd.Op != OpRenewBatch || cmd.Batch == nil || res.Batch == nil {
		fn(cmd, res)
		return
	}
	for i, id := range cmd.Batch.Sessions {
		if i < len(res.Batch.Sessions) {
			fn(KeepAliveSession(id), res.Batch.Sessions[i])
		}
	}
	for i, l := range cmd.Batch.Locks {
		if i < len(res.Batch.Locks) {
			fn(Renew(l.Key, l.Token), res.Batch.Locks[i])
		}
	}
}
