package etcd

import (
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/ticketd/ticketd/backends"
)

// progressInterval is how often a leader reports each follower's lag and
// last contact to a backends.PeerObserver: 200 ms, half the default election
// timeout, so the last-contact age a scrape computes is never more than
// that stale (a report is one map write).
const progressInterval = 200 * time.Millisecond

// progressTracker is the leader's record of when it last heard from each
// follower. etcd raft's tracker.Progress has RecentActive, reset every
// election timeout, but no time: the loop notes the time of every append
// and heartbeat response it steps. Owned by the loop goroutine.
type progressTracker struct {
	contact map[uint64]contactAt
	ticks   uint64 // loop ticks at the last report
}

// contactAt is one follower's last response and the term it answered in.
type contactAt struct {
	at   time.Time
	term uint64
}

// noteContact records a response m from a follower (MsgAppResp or
// MsgHeartbeatResp, accepted or not: either proves the link works). Other
// messages are ignored. Called by step for every received message.
func (n *Node) noteContact(m *pb.Message) {
	if t := m.GetType(); t != pb.MsgAppResp && t != pb.MsgHeartbeatResp {
		return
	}
	if n.progress.contact == nil {
		n.progress.contact = map[uint64]contactAt{}
	}
	n.progress.contact[m.GetFrom()] = contactAt{at: time.Now(), term: m.GetTerm()}
}

// reportProgress tells Config.Observer, when it is a backends.PeerObserver
// and this node leads, each follower's lag (the leader's durable last index,
// its own Progress.Match, minus the follower's Match) and last contact (a
// response of this leader's term; zero time when none yet), once per
// progressInterval. Called by the loop on every tick; cheap otherwise
// (RawNode.WithProgress does not allocate).
func (n *Node) reportProgress() {
	po, ok := n.cfg.Observer.(backends.PeerObserver)
	if !ok || n.state != raft.StateLeader {
		return
	}
	every := uint64(max(progressInterval/n.cfg.HeartbeatInterval, 1))
	if n.ticks-n.progress.ticks < every {
		return
	}
	n.progress.ticks = n.ticks
	term := n.rn.BasicStatus().GetTerm()
	for id, c := range n.progress.contact {
		if c.term != term {
			delete(n.progress.contact, id) // an earlier leadership's, or a removed member's
		}
	}
	var last uint64
	n.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == n.id {
			last = pr.Match
		}
	})
	n.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == n.id {
			return
		}
		var lag uint64
		if last > pr.Match {
			lag = last - pr.Match
		}
		var at time.Time
		if c, ok := n.progress.contact[id]; ok && c.term == term {
			at = c.at
		}
		po.FollowerProgress(n.member(id).ID, lag, at)
	})
}
