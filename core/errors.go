package core

import (
	"errors"
	"fmt"
)

// Sentinel errors of package core. Compare with errors.Is.
var (
	// ErrNotLeader: the node is not the Raft leader; the error is a *NotLeaderError
	// naming the leader when one is known.
	ErrNotLeader = errors.New("ticketd: not leader")
	// ErrStopped: the node is shutting down or has stopped.
	ErrStopped = errors.New("ticketd: stopped")
	// ErrDecode: a log entry or snapshot cannot be decoded (unknown version or
	// corrupt bytes). Fatal for the node: skipping the entry would fork the state.
	ErrDecode = errors.New("ticketd: undecodable entry")
	// ErrInvalidArgument: a request field is out of bounds; nothing was changed.
	ErrInvalidArgument = errors.New("ticketd: invalid argument")
)

// NotLeaderError is returned by Consensus methods that need the leader when the
// node is not it. errors.Is(err, ErrNotLeader) is true for it.
type NotLeaderError struct {
	// Leader is the current leader as far as this node knows; its ID is empty
	// when no leader is known (an election is under way). Backends fill ID and
	// RaftAddr; the server fills APIAddr from the member directory.
	Leader Member
}

// Error implements error.
func (e *NotLeaderError) Error() string {
	if e.Leader.ID == "" {
		return "ticketd: not leader (no leader known)"
	}
	return fmt.Sprintf("ticketd: not leader (leader is %s)", e.Leader.ID)
}

// Is reports whether target is ErrNotLeader.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }
