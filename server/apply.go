package server

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/core"
)

// This file connects the replicated lock table to the leader-local state: the
// apply hook that keeps the lessor and the wait queues in step with it, and
// the lessor's Expire proposals, and the helpers of proposals the node makes
// on its own (ghost releases, member addresses).

// onApply is the backend's OnApply hook: it keeps the lessor's leases and the
// wait queues in step with the lock table. It never blocks and never proposes.
func (n *Node) onApply(index uint64, cmd core.Command, res core.Result) {
	n.hub.Apply(index, cmd, res)
	switch cmd.Op {
	case core.OpGrant:
		if res.Outcome == core.OutcomeGranted {
			n.lessor.Granted(cmd.Key, res.Token, res.LeaseMS)
		}
	case core.OpRelease, core.OpExpire:
		n.lessor.Removed(cmd.Key, cmd.Token)
		n.ghostMu.Lock()
		if t, ok := n.ghosts[cmd.Key]; ok && t == cmd.Token {
			delete(n.ghosts, cmd.Key)
		}
		n.ghostMu.Unlock()
		n.queue.Kick(cmd.Key)
	}
}

// proposeExpire is the lessor's Expire proposal.
func (n *Node) proposeExpire(ctx context.Context, key string, token uint64) error {
	b := n.backend()
	if b == nil {
		return core.ErrStopped
	}
	res, err := b.Propose(ctx, core.Expire(key, token))
	if err == nil && res.Existed {
		n.met.expired.Inc()
		n.log.Debug("lease expired", zap.String("key", key), zap.Uint64("token", token))
	}
	return err
}

// retryPause is how long a background proposal waits before it tries again.
const retryPause = 100 * time.Millisecond

// proposeDetached proposes cmd on b for the node itself, bounded by
// proposeTimeout and the node's life rather than any client's context.
func (n *Node) proposeDetached(b Backend, cmd core.Command) (core.Result, error) {
	ctx, cancel := context.WithTimeout(n.life, proposeTimeout)
	defer cancel()
	return b.Propose(ctx, cmd)
}

// pause waits d; false when the node closes first.
func (n *Node) pause(d time.Duration) bool {
	select {
	case <-n.life.Done():
		return false
	case <-time.After(d):
		return true
	}
}
