package etcd

import (
	"fmt"

	"github.com/ticketd/ticketd/backends/etcd/internal/raftstore"
	"github.com/ticketd/ticketd/core"
)

// Sentinel errors of package etcd. Compare with errors.Is. Methods also return
// the core errors their contract names (core.ErrNotLeader via
// *core.NotLeaderError, core.ErrStopped, core.ErrInvalidArgument) and ctx
// errors, and every sentinel that a Consensus or Membership method returns
// also matches one of core's (errors.Is), so the server maps it without
// knowing this package (docs/design.md#the-consensus-contract): bad input
// matches core.ErrInvalidArgument; a change raft would not make now matches
// core.ErrNotLeader (no leader able to serve it: retry, Unavailable).
var (
	// ErrCorrupt: New found the raft state in the data dir damaged (a checksum
	// mismatch, a cut record, a gap in the log, or a HardState that contradicts
	// the log). The node refuses to start rather than panic inside raft or
	// rewrite the data; restore the data dir (or remove it and re-add the node).
	// Only New returns it.
	ErrCorrupt = raftstore.ErrCorrupt
	// ErrUnknownMember: the member named in TransferLeadership is not a voter of
	// the current configuration (or there is no other voter to pick). It
	// matches core.ErrInvalidArgument.
	ErrUnknownMember = fmt.Errorf("etcd: unknown member: %w", core.ErrInvalidArgument)
	// ErrMemberIDConflict: the member id hashes to the raft node id of another
	// member (FNV-64a collision); choose another id. It matches
	// core.ErrInvalidArgument.
	ErrMemberIDConflict = fmt.Errorf("etcd: member id collides with another member's raft id: %w", core.ErrInvalidArgument)
	// ErrConfChangeRefused: raft refused the configuration change (etcd raft
	// turns a refused change into an empty entry); retry. It matches
	// core.ErrNotLeader.
	ErrConfChangeRefused = fmt.Errorf("etcd: configuration change refused by raft: %w", core.ErrNotLeader)
	// ErrTransferFailed: leadership did not move to the chosen voter (it did not
	// catch up within an election timeout, or another node won); retry. It
	// matches core.ErrNotLeader.
	ErrTransferFailed = fmt.Errorf("etcd: leadership transfer failed: %w", core.ErrNotLeader)
)
