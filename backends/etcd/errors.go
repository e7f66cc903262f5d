package etcd

import (
	"errors"

	"github.com/ticketd/ticketd/backends/etcd/internal/raftstore"
)

// Sentinel errors of package etcd. Compare with errors.Is. Methods also return
// the core errors their contract names (core.ErrNotLeader via
// *core.NotLeaderError, core.ErrStopped, core.ErrInvalidArgument) and ctx errors.
var (
	// ErrCorrupt: New found the raft state in the data dir damaged (a checksum
	// mismatch, a cut record, a gap in the log, or a HardState that contradicts
	// the log). The node refuses to start rather than panic inside raft or
	// rewrite the data; restore the data dir (or remove it and re-add the node).
	ErrCorrupt = raftstore.ErrCorrupt
	// ErrUnknownMember: the member named in TransferLeadership is not a voter of
	// the current configuration (or there is no other voter to pick).
	ErrUnknownMember = errors.New("etcd: unknown member")
	// ErrMemberIDConflict: the member id hashes to the raft node id of another
	// member (FNV-64a collision); choose another id.
	ErrMemberIDConflict = errors.New("etcd: member id collides with another member's raft id")
	// ErrConfChangeRefused: raft refused the configuration change (etcd raft
	// turns a refused change into an empty entry); retry.
	ErrConfChangeRefused = errors.New("etcd: configuration change refused by raft")
	// ErrTransferFailed: leadership did not move to the chosen voter (it did not
	// catch up within an election timeout, or another node won).
	ErrTransferFailed = errors.New("etcd: leadership transfer failed")
)
