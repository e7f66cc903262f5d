package server

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/core"
)

// This file is the node's leadership: what it does when the backend reports a
// change (promote: the lessor and the wait queues start after the barrier;
// demote: both stop; the role the request path reads is in role.go), and the
// quorum confirmation the lessor relies on.

// onLeaderChange is the backend's OnLeaderChange hook. On promotion (after the
// barrier applied) the lessor becomes primary, keeping the deadlines this
// node measured from its own applies (no reset, docs/design.md#leases), the
// wait queues open, the voters are asked in the background for their
// own measure of each lease, to which its deadlines are lowered
// (leasegather.go), and every member for the command versions it applies
// (commandversion.go); on any other change both stop, failing every waiter
// with Unavailable (docs/design.md#leases; etcd lessor Promote/Demote).
func (n *Node) onLeaderChange(ev core.LeaderEvent) {
	// Every leader decides the cluster command version again, for its own
	// term and configuration (commandversion.go): until then it writes no
	// entry of a newer version than every member applies.
	n.versions.reset(ev.Term)
	closing := n.role.observe(ev)
	// A ghost's Release is proposed by the leader that marked it
	// (docs/design.md#ghost-locks): every mark goes with this change.
	n.lessor.ForgetGhosts()
	start := time.Now()
	if ev.IsLeader && !closing {
		n.lessor.Promote(n.sm, ev.Term)
		n.queue.Open()
		n.role.promote(ev.Term) // a later event may have superseded this one
		n.bg.Add(3)
		go n.ensureMembers(ev.Term)
		go n.gatherLeaseReports(ev.Term) // lowers deadlines later: service does not wait (leasegather.go)
		go n.watchCommandVersions(ev.Term)
	} else {
		n.lessor.Demote()
		n.queue.Close()
	}
	n.role.announce()
	// took: the promotion's own work (lessor, queues), which does not grow
	// with the lock table (docs/design.md#leases).
	n.log.Info("leadership changed", zap.Bool("leader", ev.IsLeader), zap.String("leader_id", ev.Leader.ID), zap.Uint64("term", ev.Term),
		zap.Duration("took", time.Since(start)))
}

// stillLeader reports whether this node is the promoted leader of term.
func (n *Node) stillLeader(term uint64) bool { return n.role.leads(term) }

// ensureMembers makes the replicated member directory hold this node's API
// address at once, and each founding peer's (from the bootstrap list) once
// this leader has heard from that peer, retrying while this node leads
// term. A founding member's address in the directory therefore says that
// it took part in the cluster: a node that finds it there while about to
// bootstrap an empty data dir refuses (bootstrapcheck.go), and one that
// never started is not listed, so it can still bootstrap late.
func (n *Node) ensureMembers(term uint64) {
	defer n.bg.Done()
	b := n.backend()
	if b == nil {
		return
	}
	want := map[string]string{n.cfg.ID: n.cfg.APIAddr}
	for _, m := range n.cfg.Members() {
		if _, ok := n.sm.MemberAPIAddr(m.ID); !ok {
			want[m.ID] = m.APIAddr
		}
	}
	for len(want) > 0 && n.stillLeader(term) {
		for id, addr := range want {
			if got, _ := n.sm.MemberAPIAddr(id); got == addr {
				delete(want, id)
				continue
			}
			if id != n.cfg.ID && !n.hasMember(id) {
				delete(want, id) // removed since the bootstrap
				continue
			}
			if id != n.cfg.ID && !n.met.cluster.peers.heardFrom(id) {
				continue // not up yet, or not answering this leader
			}
			if _, err := n.proposeDetached(b, core.SetMember(id, addr)); err != nil {
				n.log.Debug("recording member API address failed", zap.String("member", id), zap.Error(err))
				continue
			}
			n.log.Info("member API address recorded", zap.String("member", id), zap.String("api_addr", addr))
			delete(want, id)
		}
		if len(want) > 0 && !n.pause(retryPause) {
			return
		}
	}
}

// confirmTerm is the lessor's quorum confirmation: it returns the term in
// which a quorum confirmed this node's leadership (Raft thesis §6.4,
// ReadIndex; core.TermConfirmer). Errors: ConfirmTerm's, and core.ErrStopped
// once the node is closing.
func (n *Node) confirmTerm(ctx context.Context) (uint64, error) {
	b := n.backend()
	if b == nil {
		return 0, core.ErrStopped
	}
	return b.ConfirmTerm(ctx)
}
