package hashicorp

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// This file is ReadIndex and ConfirmTerm (Raft thesis §6.4: leadership
// confirmed by a quorum, then the state machine caught up with the commit
// index read at the call), and the wake-up channel their waits sleep on,
// closed at every apply and leadership change.

// ReadIndex returns once this node's state machine has applied every entry
// committed before the call, with leadership confirmed by a quorum after the
// call began (Raft thesis §6.4); see ConfirmTerm. Errors:
// *core.NotLeaderError, core.ErrStopped, ctx.Err().
func (n *Node) ReadIndex(ctx context.Context) error {
	_, err := n.ConfirmTerm(ctx)
	return err
}

// ConfirmTerm implements core.TermConfirmer: ReadIndex that returns the term
// in which a quorum confirmed this node's leadership. It reads the term and
// the commit index, calls VerifyLeader, reads the term again, then waits
// until this leader's barrier of that term is applied and AppliedIndex ≥ the
// commit index read first. hashicorp's VerifyLeader does not say which term
// it confirmed; but terms only grow and the leader loop that answers it runs
// in the term current at that moment, so when the term read before and the
// term read after are equal, that term is the confirmed one. When they
// differ, leadership changed during the call and it fails with
// *core.NotLeaderError. Errors: *core.NotLeaderError, core.ErrStopped,
// ctx.Err().
func (n *Node) ConfirmTerm(ctx context.Context) (uint64, error) {
	if err := n.checkOpen(); err != nil {
		return 0, err
	}
	term := n.raft.CurrentTerm()
	if n.raft.State() != raft.Leader {
		return 0, n.notLeader()
	}
	commit := n.raft.CommitIndex()
	if _, err := n.do(ctx, func(time.Duration) raft.Future { return n.raft.VerifyLeader() }); err != nil {
		return 0, err
	}
	if n.raft.CurrentTerm() != term {
		return 0, n.notLeader()
	}
	for {
		changed := n.changes()
		if n.raft.State() != raft.Leader || n.raft.CurrentTerm() != term {
			return 0, n.notLeader()
		}
		if n.readyTerm.Load() == term && n.sm.AppliedIndex() >= commit {
			return term, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-n.stopCh:
			return 0, n.stoppedErr()
		}
	}
}

// changes returns a channel closed at the next apply or leadership change.
func (n *Node) changes() <-chan struct{} {
	n.changeMu.Lock()
	defer n.changeMu.Unlock()
	return n.changeCh
}

// changed wakes everything waiting on changes().
func (n *Node) changed() {
	n.changeMu.Lock()
	close(n.changeCh)
	n.changeCh = make(chan struct{})
	n.changeMu.Unlock()
}
