package core

import "context"

// Member is one server of the Raft configuration.
type Member struct {
	// ID is the stable node id (hashicorp ServerID; etcd raft node id is derived from it).
	ID string
	// RaftAddr is the host:port of the node's peer (Raft) traffic.
	RaftAddr string
	// APIAddr is the host:port of the node's client API; filled by the server
	// from the replicated member directory (SetMember), empty inside backends.
	APIAddr string
	// Voter is true for voters, false for non-voting learners.
	Voter bool
}

// Status is a node's view of its Raft group at one moment.
type Status struct {
	// ID is this node's id; Backend names the consensus engine ("hashicorp", "etcd").
	ID      string
	Backend string
	// Leader is the leader this node knows of (zero when none is known).
	Leader Member
	// Term is the current Raft term; CommitIndex the highest log index known
	// committed; AppliedIndex the highest index applied to the state machine.
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	// RecoveredCommitIndex is the highest log index this node had durably
	// recorded as committed (or applied) before its latest start. Until
	// AppliedIndex reaches it the node is replaying its log: its state is
	// older than the state it served before it stopped, so it must not serve
	// stale reads (they would go backwards).
	RecoveredCommitIndex uint64
	// Members is the latest Raft configuration, sorted by ID.
	Members []Member
}

// LeaderEvent reports a change of leadership as seen by one node.
type LeaderEvent struct {
	// IsLeader is true when this node has become leader AND has applied a
	// barrier entry of its own term, so every entry of earlier terms is applied
	// (docs/design.md#leases; Raft thesis §6.4). It is false when this node stopped
	// being leader or the leader changed.
	IsLeader bool
	// Leader is the new leader (ID and RaftAddr), zero if unknown.
	Leader Member
	// Term is the term of the change.
	Term uint64
}

// Consensus is what every consensus backend provides: a replicated, linearizable
// log of Commands applied to a core.StateMachine. Implementations must be safe
// for concurrent use by many goroutines.
//
// Submitter and TermConfirmer are parts of it, each a small interface with
// its own contract, not optional capabilities: every backend implements
// them, so their callers need no fallback
// (docs/design.md#the-consensus-contract).
type Consensus interface {
	// Propose replicates cmd, waits until it is committed by a quorum and applied
	// to the local state machine, and returns the state machine's Result.
	// Concurrent proposals are group-committed (one log append, one fsync, one
	// replication round per batch). Errors: *NotLeaderError (errors.Is
	// ErrNotLeader), ErrStopped, ErrInvalidArgument for an unencodable command,
	// or ctx.Err(). After a ctx error the command may still commit.
	Propose(ctx context.Context, cmd Command) (Result, error)
	// Submitter is Propose split in two: Submit returns once cmd is queued
	// for the log, and its wait returns what Propose would.
	Submitter
	// ReadIndex returns once this node's state machine has applied every entry
	// committed before the call, with leadership confirmed by a quorum after the
	// call began (Raft thesis §6.4; etcd ReadIndex, hashicorp VerifyLeader).
	// Only the leader serves it. Errors: *NotLeaderError, ErrStopped, ctx.Err().
	ReadIndex(ctx context.Context) error
	// TermConfirmer is ReadIndex that also says which term the quorum
	// confirmed.
	TermConfirmer
	// Leader returns the leader this node knows of (ID and RaftAddr) and whether one is known.
	Leader() (Member, bool)
	// Status returns this node's view of the group.
	Status() Status
	// Close stops the node: pending proposals fail with ErrStopped, storage is
	// closed. It is safe to call more than once.
	Close() error
}

// Membership changes the Raft configuration. Every method must be called on the
// leader and returns once the change is committed; errors are as for Propose.
type Membership interface {
	// AddVoter adds m (ID, RaftAddr) as a voter, or updates its address.
	AddVoter(ctx context.Context, m Member) error
	// RemoveServer removes the server with id from the configuration.
	RemoveServer(ctx context.Context, id string) error
	// TransferLeadership hands leadership to the voter id, or to the most
	// up-to-date voter when id is empty (Raft thesis §3.10).
	TransferLeadership(ctx context.Context, id string) error
}

// TermConfirmer is the part of a Consensus that says which term a quorum
// confirmed: a ReadIndex that returns it. The lessor uses it so that an
// expiry round decided under one leadership epoch proposes nothing once that
// epoch has ended (a stale round after demote and re-promote;
// docs/design.md#leases).
type TermConfirmer interface {
	// ConfirmTerm is ReadIndex that returns the term in which leadership was
	// confirmed by a quorum. Errors are ReadIndex's.
	ConfirmTerm(ctx context.Context) (term uint64, err error)
}

// Submitter is the part of a Consensus that splits Propose in two, so that a
// caller can order a command before others without waiting for its commit.
// The server uses it for the pipelined handoff (docs/design.md#handoff): the holder's
// Release is submitted, then the head waiter's Grant is proposed, and the
// Grant can never enter the log ahead of the Release.
type Submitter interface {
	// Submit hands cmd to this node's log append path (hashicorp/raft's apply
	// channel, etcd raft's proposal queue) and returns without waiting for
	// commit. It may block while that path is busy, bounded by ctx. Submit is
	// safe for concurrent use.
	//
	// Order: when Submit returns nil, cmd is queued ahead of every command
	// given to this node by a Submit or Propose call that begins after Submit
	// returned, from any goroutine. If cmd and such a later command both
	// commit, cmd commits at the lower log index. Nothing more is promised:
	// either may be dropped (a leadership change, raft dropping a proposal,
	// cmd's ctx ending before it was appended) while the other still commits,
	// in this term or, appended again by the caller, in a later one.
	//
	// wait blocks until cmd is applied here and returns its Result, with the
	// errors Propose would return: *NotLeaderError (cmd was dropped, or its
	// leader stepped down before it applied: it may still commit), ErrStopped,
	// or ctx.Err() (cmd may still commit). Call wait exactly once. Errors of
	// Submit itself: *NotLeaderError, ErrStopped, ErrInvalidArgument for an
	// unencodable command, ctx.Err(); cmd is then not queued. A backend may
	// also return nil for a cmd whose queueing failed (hashicorp/raft reports
	// an enqueue timeout through the future): wait then returns ctx.Err() or
	// ErrStopped and cmd never enters the log.
	Submit(ctx context.Context, cmd Command) (wait func(ctx context.Context) (Result, error), err error)
}
