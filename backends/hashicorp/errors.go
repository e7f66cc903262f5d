package hashicorp

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/core"
)

// This file is the package's errors: its sentinels, and how hashicorp/raft's
// errors become core's, so that every method answers with core's errors
// only.

// Sentinel errors of package hashicorp. Compare with errors.Is.
var (
	// ErrDropped: an outbound Raft RPC was dropped by Config.DropMessage (fault
	// injection in tests); hashicorp/raft sees it as a failed network call.
	ErrDropped = errors.New("hashicorp: message dropped")
	// ErrMessageTooLarge: a peer sent more than Config.MaxMessageBytes
	// (plus the transport's read buffer) on one connection without waiting
	// for an answer; the connection is closed (see boundedConn).
	ErrMessageTooLarge = errors.New("hashicorp: peer message too large")
	// ErrForgedSender: a peer with a certificate claimed, in a request's
	// RPCHeader.ID, to be a member other than the one its certificate
	// names (CN = member id, as ticketctl cert create-node writes it); the
	// connection is closed (see msgFramer).
	ErrForgedSender = errors.New("hashicorp: peer claims another member's identity")
)

// mapErr turns hashicorp's errors into core's (no string matching: they are
// sentinels), so that callers see only core errors
// (docs/design.md#the-consensus-contract). Any other library error (a
// leadership transfer that timed out, a restore in progress, an unsupported
// protocol) means "this leader cannot do it now": it is wrapped with a
// *core.NotLeaderError naming no leader (Unavailable, retry; the outcome of a
// command is then unknown, as after a ctx error).
func (n *Node) mapErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return &core.NotLeaderError{}
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrNotVoter):
		return n.notLeader()
	case errors.Is(err, raft.ErrRaftShutdown):
		return n.stoppedErr()
	}
	return fmt.Errorf("%w: hashicorp: %w", &core.NotLeaderError{}, err)
}

// notLeader returns a *core.NotLeaderError naming the leader this node knows,
// or none when that is itself (it is losing leadership) or unknown.
func (n *Node) notLeader() error {
	m, ok := n.Leader()
	if !ok || m.ID == n.cfg.ID {
		return &core.NotLeaderError{}
	}
	return &core.NotLeaderError{Leader: m}
}
